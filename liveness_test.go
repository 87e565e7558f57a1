package lockactor_test

// Liveness: no waiter is left asleep on a free lock or behind one that left,
// no lock is kept alive after its owner let go, and Close does not hang.
// Most of these failed before the lock actors were rebuilt around one
// reconcile step.

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
)

// lockAsync runs l.Lock(ctx) in a goroutine and reports when it returned.
func lockAsync(ctx context.Context, l lockactor.Locker) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx) }()
	return done
}

// lockAsyncWith runs l.Lock(ctx, opts...) in a goroutine and reports when it
// returned.
func lockAsyncWith(ctx context.Context, l lockactor.Locker, opts ...lockactor.LockOption) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx, opts...) }()
	return done
}

// waitErr waits up to d for done; it fails the test if nothing came.
func waitErr(t *testing.T, done <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
		return nil
	}
}

// warmScripts loads the lock scripts (so a hook that loses a reply finds
// them run, not refused with NOSCRIPT) and leaves nothing held.
func warmScripts(t *testing.T, c *lockactor.Client, ctx context.Context) {
	t.Helper()
	l := c.Lock("warm-up")
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Callers that give up free their queue entry at once, wherever they stand.
func TestWithdrawnWaitersAreFreed(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 60*time.Second)
	if err := c.Lock("withdrawn").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	long := lockAsync(ctx, c.Lock("withdrawn")) // stays at the head
	time.Sleep(100 * time.Millisecond)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// A wait long enough that the actor queues each call before it gives up.
	const calls, callers = 40000, 40
	before := heap()
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := c.Lock("withdrawn")
			for i := 0; i < calls/callers; i++ {
				if ok, err := l.TryLock(ctx, lockactor.WithWait(time.Millisecond)); ok || err != nil {
					t.Errorf("TryLock = %v, %v", ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // the last Abandon messages
	grown := int64(heap()) - int64(before)
	t.Logf("heap grew %d B over %d withdrawn calls (%.0f B each)", grown, calls, float64(grown)/calls)
	if grown > calls*50 {
		t.Fatalf("heap grew %d B (%d B per withdrawn call): withdrawn waiters are kept", grown, grown/calls)
	}
	select {
	case err := <-long:
		t.Fatalf("the long waiter returned: %v", err)
	default:
	}
}

// Close returns in bounded time even when a command is stuck on a server
// that does not answer and the go-redis client has no read timeout.
func TestCloseBoundedOnHungRedis(t *testing.T) {
	srv := redistest.Start(t)
	if srv.Embedded() {
		t.Skip("needs a real redis-server to SIGSTOP")
	}
	rdb := srv.ClientWith(t, func(o *redis.Options) { o.ReadTimeout = -1 })
	c, err := lockactor.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume(t)
		}
	}()
	lctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := c.Lock("hung-close").Lock(lctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a stopped server = %v, want DeadlineExceeded", err)
	}
	closed := make(chan struct{})
	start := time.Now()
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Logf("Close returned in %v with a command stuck in go-redis", time.Since(start))
	case <-time.After(3 * time.Second):
		t.Error("Close still waiting 3s after it was called, on a stopped server")
	}
	srv.Resume(t) // the stuck command returns; its goroutine ends (goleak in TestMain)
	resumed = true
	<-closed
}

// A grant whose reply comes back after its lease has run out is not handed
// out: the hold may be gone already. Lock gives it back and takes a fresh
// one. One that comes back with some of its lease left is the caller's.
func TestLateGrantIsNotHandedOut(t *testing.T) {
	const lease = 400 * time.Millisecond
	tests := []struct {
		name  string
		delay time.Duration // the first grant's reply comes back this late
		fresh bool          // the caller gets a fresh grant, not the late one
	}{
		{"past its lease", 450 * time.Millisecond, true},
		{"with some of its lease left", 200 * time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb, hook := hooked(t, srv)
			c := newClient(t, rdb)
			ctx := ctxFor(t, 20*time.Second)
			warmScripts(t, c, ctx)
			late := hook.add(&faultRule{match: evalOf(scripts.Latched.Lock.Hash()), times: 1, delay: tc.delay, after: true})
			l := c.Lock("late-grant")
			if err := l.Lock(ctx, lockactor.WithLease(lease)); err != nil {
				t.Fatal(err)
			}
			left, err := l.RemainingLease(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sent := hook.count(late)
			switch {
			case tc.fresh && left < lease/2:
				t.Fatalf("Lock returned with %v of a %v lease left (acquire scripts sent: %d)", left, lease, sent)
			case !tc.fresh && (left <= 0 || left > lease-tc.delay):
				t.Fatalf("Lock returned with %v of a %v lease left, want the late grant's rest (acquire scripts sent: %d)", left, lease, sent)
			}
			if n, _ := l.HoldCount(ctx); n != 1 {
				t.Fatalf("HoldCount = %d, want 1: the late grant was not given back", n)
			}
		})
	}
}

// A waiter whose grant arrives after it gave up must not take a queue slot
// with it: the grant goes back and the waiters behind are served, in order,
// each answered. (Once, the nested release this set off popped a waiter
// without answering it, or panicked on an empty queue and answered the
// release twice, blocking the actor.)
func TestGrantToWaiterThatLeftKeepsQueueServed(t *testing.T) {
	srv := redistest.Start(t)
	rdb, hook := hooked(t, srv)
	c := newClient(t, rdb)
	ctx := ctxFor(t, 30*time.Second)
	holder := c.FencedLock("left") // fenced: no hand-off, grants go through the queue
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	w1ctx, cancelW1 := context.WithCancel(ctx)
	w1 := c.FencedLock("left")
	w1Done := lockAsync(w1ctx, w1)
	time.Sleep(100 * time.Millisecond)
	w2 := c.FencedLock("left")
	w2Done := lockAsync(ctx, w2)
	time.Sleep(50 * time.Millisecond)
	w3 := c.FencedLock("left")
	w3Done := lockAsync(ctx, w3)
	time.Sleep(100 * time.Millisecond)

	hook.add(&faultRule{match: evalOf(scripts.Latched.FencedLock.Hash()), times: 1, delay: 150 * time.Millisecond})
	go func() { time.Sleep(50 * time.Millisecond); cancelW1() }() // during W1's grant
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, w1Done, 2*time.Second, "W1"); err == nil {
		if err := w1.Unlock(ctx); err != nil { // it won the race: fine, let go
			t.Fatal(err)
		}
	} else if !errors.Is(err, context.Canceled) {
		t.Fatalf("W1 = %v", err)
	}
	if err := waitErr(t, w2Done, 3*time.Second, "W2"); err != nil {
		t.Fatal(err)
	}
	uctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := w2.Unlock(uctx); err != nil {
		t.Fatalf("W2's Unlock: %v (the actor is blocked?)", err)
	}
	if err := waitErr(t, w3Done, 3*time.Second, "W3"); err != nil {
		t.Fatal(err)
	}
	if n, _ := w1.HoldCount(ctx); n != 0 {
		t.Fatal("W1 holds the lock after giving up")
	}
}
