package lockactor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// The program a Go developer writes first: one lock stored once, like a
// sync.Mutex field, used by four goroutines 10ms apart, each inside for
// 50ms. With a Mutex one goroutine is inside at a time; with a *Lock handle
// per goroutine, the same. (A *Lock shared the same way is one owner and
// lets them all in: that is what Mutex is for.)
func TestSharedMutexExcludesGoroutines(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 20*time.Second)
	tests := []struct {
		name string
		lock func(i int) lockactor.Locker
	}{
		{"one Mutex shared", func() func(int) lockactor.Locker {
			mu := c.Mutex("shared-mutex")
			return func(int) lockactor.Locker { return mu }
		}()},
		{"a Lock handle per goroutine", func(int) lockactor.Locker { return c.Lock("handle-each") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var inside, most atomic.Int32
			var wg sync.WaitGroup
			for i := range 4 {
				l := tc.lock(i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Duration(i) * 10 * time.Millisecond)
					if err := l.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(50 * time.Millisecond)
					inside.Add(-1)
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if n := most.Load(); n != 1 {
				t.Fatalf("most goroutines inside at once: %d, want 1", n)
			}
		})
	}
}

// A Mutex is not reentrant, and any goroutine may unlock its hold.
func TestMutexLikeSyncMutex(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	mu := c.Mutex("like-sync")
	if err := mu.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock of a free Mutex = %v, want ErrNotHeld", err)
	}
	if err := mu.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := mu.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock of the holding Mutex = %v, %v; want false (not reentrant)", ok, err)
	}
	if ok, err := c.Lock("like-sync").TryLock(ctx); ok || err != nil {
		t.Fatalf("a Lock handle's TryLock while the Mutex holds = %v, %v", ok, err)
	}
	done := make(chan error, 1)
	go func() { done <- mu.Unlock(ctx) }() // another goroutine unlocks
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ok, err := mu.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock after the other goroutine's Unlock = %v, %v", ok, err)
	}
	if err := mu.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mu.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) || mu.Name() != "like-sync" {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
}

// Lost keeps its promise: a channel taken before Lock is the one the hold
// closes; a WithLease hold's closes when its lease ends; after Unlock the
// next channel is fresh. For a Lock, a Mutex, a MultiLock and a RedLock.
func TestLostBeforeLockAndAtLeaseEnd(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 20*time.Second)
	const lease = 300 * time.Millisecond
	tests := []struct {
		name string
		l    lockactor.Locker
	}{
		{"Lock", c.Lock("lost-lock")},
		{"Mutex", c.Mutex("lost-mutex")},
		{"MultiLock", lockactor.NewMultiLock(c.Lock("lost-m1"), c.Lock("lost-m2"))},
		{"RedLock", lockactor.NewRedLock(c.Lock("lost-r1"), c.Lock("lost-r2"), c.Lock("lost-r3"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.l.Lost() // taken while nothing is held
			start := time.Now()
			if err := tc.l.Lock(ctx, lockactor.WithLease(lease)); err != nil {
				t.Fatal(err)
			}
			if tc.l.Lost() != before {
				t.Fatal("Lost after Lock is not the channel taken before it")
			}
			select {
			case <-before:
				t.Fatal("Lost closed right after Lock")
			case <-time.After(lease / 3):
			}
			select {
			case <-before:
				if d := time.Since(start); d > lease+time.Second {
					t.Fatalf("Lost closed %v after Lock, lease %v", d, lease)
				}
			case <-time.After(lease + 2*time.Second):
				t.Fatalf("Lost still open %v after a %v lease began", time.Since(start), lease)
			}
			// Lost closes when the lease ends counted from the grant's send;
			// Redis counts from when it ran the script, a little later, so
			// the release may still find the hold.
			if err := tc.l.Unlock(ctx); err != nil && !errors.Is(err, lockactor.ErrNotHeld) && !errors.Is(err, lockactor.ErrNoQuorum) {
				t.Fatalf("Unlock as the lease ran out = %v, want nil or ErrNotHeld", err)
			}
			next := tc.l.Lost()
			if next == before {
				t.Fatal("after Unlock, Lost is still the old hold's")
			}
			if err := tc.l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := tc.l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-next:
				t.Fatal("the next hold's Lost closed though it was unlocked")
			case <-time.After(20 * time.Millisecond):
			}
		})
	}
}

// After Close, Redis holds nothing of the Client's own bookkeeping: each
// name it used leaves no request record (before, one key per name, for an
// hour).
func TestCloseLeavesNoRecords(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	c, err := lockactor.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 20*time.Second)
	for i := range 100 {
		l := c.Lock("invoice:" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := c.Semaphore("sem-close").TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if n := len(admin.Keys(ctx, "lockactor_latch:*").Val()); n < 100 {
		t.Fatalf("%d request records while the Client runs, want one per name", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if left := admin.Keys(context.Background(), "lockactor_latch:*"+c.ID()+"*").Val(); len(left) != 0 {
		t.Fatalf("%d request records left after Close, e.g. %s", len(left), left[0])
	}
}

// A hold that lapses (its lease runs out) stays the Mutex's until its
// goroutine's Unlock, as with a sync.Mutex: another goroutine's Lock, though
// Redis grants it, returns only after that Unlock, and that Unlock does not
// release the new hold. Before, the lapsed hold's Unlock released whatever
// hold was current, another goroutine's, which the torture suite saw as
// two goroutines inside at once.
func TestMutexLapsedHoldUnlocksOnlyItself(t *testing.T) {
	t.Parallel()
	mu, admin, ctx := lapsedMutex(t, "lapsed")
	second := make(chan error, 1)
	go func() { second <- mu.Lock(ctx) }()
	within(t, 2*time.Second, "the second goroutine's grant in Redis", func() bool { return admin.Exists(ctx, "lapsed").Val() == 1 })
	select {
	case err := <-second:
		t.Fatalf("the second Lock returned (%v) before the lapsed hold's Unlock", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := mu.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("the lapsed hold's Unlock = %v, want ErrNotHeld", err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if n := admin.Exists(ctx, "lapsed").Val(); n != 1 {
		t.Fatal("the lapsed hold's Unlock released the second goroutine's hold")
	}
	if err := mu.Unlock(ctx); err != nil {
		t.Fatalf("the second hold's Unlock = %v", err)
	}
}

// A grant that lapses while it waits for the previous hold's Unlock is not
// handed over: the waiting Lock gives it back and takes a fresh hold, whose
// Lost is open when Lock returns. Before, a Cluster torture run handed a
// goroutine a 381 ms lease half a second after Redis granted it.
func TestMutexGrantLapsedWhileWaitingIsNotHandedOver(t *testing.T) {
	t.Parallel()
	mu, admin, ctx := lapsedMutex(t, "lapsed-wait")
	second := make(chan error, 1)
	go func() { second <- mu.Lock(ctx, lockactor.WithLease(250*time.Millisecond)) }()
	within(t, 2*time.Second, "the second goroutine's grant in Redis", func() bool { return admin.Exists(ctx, "lapsed-wait").Val() == 1 })
	time.Sleep(500 * time.Millisecond) // the waiting grant's 250 ms lease runs out
	if err := mu.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("the lapsed hold's Unlock = %v, want ErrNotHeld", err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	select {
	case <-mu.Lost():
		t.Fatal("Lock returned a hold whose lease had run out while it waited")
	default:
	}
	if n := admin.Exists(ctx, "lapsed-wait").Val(); n != 1 {
		t.Fatal("Lock returned while Redis holds nothing")
	}
	if err := mu.Unlock(ctx); err != nil && !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("the second hold's Unlock = %v", err)
	}
}

// lapsedMutex is a Mutex on a server of its own whose hold, taken with a
// 100 ms lease, has run out (Lost closed) with its Unlock not yet called;
// with an admin connection to that server and a 10 s context.
func lapsedMutex(t *testing.T, name string) (*lockactor.Mutex, *redis.Client, context.Context) {
	t.Helper()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := ctxFor(t, 10*time.Second)
	mu := newClient(t, srv.Client(t)).Mutex(name)
	if err := mu.Lock(ctx, lockactor.WithLease(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mu.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("Lost still open after the lease ran out")
	}
	return mu, admin, ctx
}
