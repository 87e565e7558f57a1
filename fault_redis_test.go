//go:build full

package lockactor_test

// A single server's faults (kill -9, SIGSTOP, dropped connections) as
// Lock's callers see them.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	const wd = 900 * time.Millisecond
	holder := newClient(t, srv.Client(t), lockactor.WithWatchdogTimeout(wd)).Lock("killed")
	fast := srv.ClientWith(t, func(o *redis.Options) { o.MaxRetries = -1; o.DialerRetries = 1 })
	waiters := newClient(t, fast)
	ctx := ctxFor(t, 20*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- waiters.Lock("killed").Lock(ctx) }()
	time.Sleep(100 * time.Millisecond)
	srv.Kill(t)
	killed := time.Now()

	select {
	case err := <-waitErr:
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiter on a killed Redis = %v, want a Redis error", err)
		}
		t.Logf("waiter failed %v after the kill: %v", time.Since(killed), err)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter still blocked 5s after Redis was killed")
	}
	start := time.Now()
	if _, err := waiters.Lock("other").TryLock(ctx); err == nil {
		t.Fatal("TryLock on a dead Redis returned no error")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("TryLock on a dead Redis took %v", d)
	}
	select {
	case <-holder.Lost():
		t.Logf("holder saw Lost %v after the kill", time.Since(killed))
	case <-time.After(wd + time.Second):
		t.Fatal("holder's Lost did not close after Redis died")
	}
}

func TestHungRedisKeepsCallerDeadlines(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t)) // default go-redis options: ctx deadlines ignored on reads
	ctx := ctxFor(t, 20*time.Second)
	// Unlock and HoldCount get a handle each: a handle whose Unlock is
	// under way holds nothing by its own count and answers 0 at once.
	held, counted := c.Lock("hung"), c.Lock("hung4")
	for _, l := range []*lockactor.Lock{held, counted} {
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	srv.Pause(t)
	defer srv.Resume(t)
	calls := map[string]func(context.Context) error{
		"Lock":      func(ctx context.Context) error { return c.Lock("hung2").Lock(ctx) },
		"TryLock":   func(ctx context.Context) error { _, err := c.Lock("hung3").TryLock(ctx); return err },
		"Unlock":    func(ctx context.Context) error { return held.Unlock(ctx) },
		"HoldCount": func(ctx context.Context) error { _, err := counted.HoldCount(ctx); return err },
		"IsLocked":  func(ctx context.Context) error { _, err := held.IsLocked(ctx); return err },
	}
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			callCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := call(callCtx)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s on a hung Redis = %v, want DeadlineExceeded", name, err)
			}
			if d := time.Since(start); d > 700*time.Millisecond {
				t.Errorf("%s on a hung Redis took %v with a 200ms deadline", name, d)
			}
		}()
	}
	wg.Wait()
}

func TestHungRedisHolderSeesLost(t *testing.T) {
	srv := redistest.Start(t)
	const wd = 900 * time.Millisecond
	l := newClient(t, srv.Client(t), lockactor.WithWatchdogTimeout(wd)).Lock("frozen")
	ctx := ctxFor(t, 20*time.Second)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	paused := time.Now()
	select {
	case <-l.Lost():
		// The lease ran out unconfirmed: the holder must assume it is gone
		// even though every renewal is still stuck on the frozen server.
		if d := time.Since(paused); d > wd+300*time.Millisecond {
			t.Errorf("Lost closed %v after the pause, want by the lease end (%v)", d, wd)
		}
	case <-time.After(wd + 2*time.Second):
		t.Fatal("Lost did not close while Redis was frozen")
	}
	srv.Resume(t)
}

func TestSubscriptionSurvivesReconnect(t *testing.T) {
	srv := redistest.Start(t)
	srv.NeedsReal(t, "CLIENT KILL TYPE pubsub")
	rdb := srv.Client(t)
	holder := newClient(t, srv.Client(t)).Lock("resub")
	waiter := newClient(t, srv.Client(t)).Lock("resub")
	ctx := ctxFor(t, 20*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	woke := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error {
		// Drop every subscription connection; the command connections stay.
		if n, err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n == 0 {
			return fmt.Errorf("CLIENT KILL TYPE pubsub = %d, %v", n, err)
		}
		within(t, 3*time.Second, "waiter resubscribed", func() bool {
			return rdb.PubSubNumSub(ctx, "redisson_lock__channel:{resub}").Val()["redisson_lock__channel:{resub}"] == 1
		})
		return holder.Unlock(ctx)
	})
	if woke > 300*time.Millisecond {
		t.Fatalf("woken %v after Unlock: the resubscribed channel did not deliver", woke)
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
