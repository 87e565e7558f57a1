package lockactor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

func TestCancelMidWait(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	holder := c.Lock("cancel")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	waiter := c.Lock("cancel")
	go func() { done <- waiter.Lock(waitCtx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	cancelled := time.Now()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock after cancel = %v, want context.Canceled", err)
	}
	if d := time.Since(cancelled); d > 250*time.Millisecond {
		t.Fatalf("Lock returned %v after cancel", d)
	}
	// A later waiter is not stuck behind the one that left.
	next := c.Lock("cancel")
	got := make(chan error, 1)
	go func() { got <- next.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter behind a cancelled one was not woken")
	}
	if n, _ := waiter.HoldCount(ctx); n != 0 {
		t.Fatal("the cancelled waiter holds the lock")
	}
}

// TestCancelRacingGrant cancels waits at the moment the lock is released, many
// times: whichever side wins, a cancelled call must hold nothing.
func TestCancelRacingGrant(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 60*time.Second)
	holder, waiter := c.Lock("race"), c.Lock("race")
	cancelledHolds, grants := 0, 0
	for i := 0; i < 100; i++ {
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		waitCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- waiter.Lock(waitCtx) }()
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		go func() { _ = holder.Unlock(ctx) }()
		time.Sleep(time.Duration(i%10) * 300 * time.Microsecond)
		cancel()
		err := <-done
		if err == nil {
			grants++
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatalf("round %d: Unlock after a grant: %v", i, err)
			}
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", i, err)
		}
		cancelledHolds++
		// The give-back is asynchronous but ordered before any later call.
		within(t, 2*time.Second, "cancelled waiter's hold given back", func() bool {
			n, _ := waiter.HoldCount(ctx)
			return n == 0
		})
		within(t, 2*time.Second, "lock free again", func() bool {
			locked, _ := holder.IsLocked(ctx)
			return !locked
		})
	}
	t.Logf("%d grants, %d cancellations", grants, cancelledHolds)
}

func TestTryLockWaitTimesOut(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	if err := c.Lock("busy").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ok, err := c.Lock("busy").TryLock(ctx, lockactor.WithWait(300*time.Millisecond))
	took := time.Since(start)
	if ok || err != nil {
		t.Fatalf("TryLock on a held lock = %v, %v; want false, nil", ok, err)
	}
	if took < 250*time.Millisecond || took > 2*time.Second {
		t.Fatalf("TryLock with a 300ms wait took %v", took)
	}
}

func TestCloseWakesWaitersWithErrClosed(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv.Client(t)).Lock("closing")
	ctx := ctxFor(t, 10*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := lockactor.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		l := c.Lock("closing")
		go func() { errs <- l.Lock(ctx) }()
	}
	time.Sleep(100 * time.Millisecond)
	_ = c.Close()
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, lockactor.ErrClosed) {
				t.Fatalf("waiter after Close = %v, want ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("waiter still blocked after Close")
		}
	}
	if err := c.Lock("closing").Unlock(ctx); !errors.Is(err, lockactor.ErrClosed) {
		t.Fatalf("call after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

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
	held := c.Lock("hung")
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	calls := map[string]func(context.Context) error{
		"Lock":      func(ctx context.Context) error { return c.Lock("hung2").Lock(ctx) },
		"TryLock":   func(ctx context.Context) error { _, err := c.Lock("hung3").TryLock(ctx); return err },
		"Unlock":    func(ctx context.Context) error { return held.Unlock(ctx) },
		"HoldCount": func(ctx context.Context) error { _, err := held.HoldCount(ctx); return err },
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

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	ctx := ctxFor(t, 10*time.Second)
	var nilCtx context.Context
	tests := []struct {
		name string
		call func() error
	}{
		{"empty name Lock", func() error { return c.Lock("").Lock(ctx) }},
		{"empty name TryLock", func() error { _, err := c.Lock("").TryLock(ctx); return err }},
		{"empty name Unlock", func() error { return c.Lock("").Unlock(ctx) }},
		{"empty name ForceUnlock", func() error { _, err := c.Lock("").ForceUnlock(ctx); return err }},
		{"empty name IsLocked", func() error { _, err := c.Lock("").IsLocked(ctx); return err }},
		{"empty name HoldCount", func() error { _, err := c.Lock("").HoldCount(ctx); return err }},
		{"empty name RemainingLease", func() error { _, err := c.Lock("").RemainingLease(ctx); return err }},
		{"negative lease", func() error { return c.Lock("x").Lock(ctx, lockactor.WithLease(-time.Second)) }},
		{"negative wait", func() error { _, err := c.Lock("x").TryLock(ctx, lockactor.WithWait(-1)); return err }},
		{"nil ctx Lock", func() error { return c.Lock("x").Lock(nilCtx) }},
		{"nil ctx TryLock", func() error { _, err := c.Lock("x").TryLock(nilCtx); return err }},
		{"nil ctx Unlock", func() error { return c.Lock("x").Unlock(nilCtx) }},
		{"nil ctx IsHeldByMe", func() error { _, err := c.Lock("x").IsHeldByMe(nilCtx); return err }},
		{"New(nil)", func() error { _, err := lockactor.New(nil); return err }},
		{"New(typed nil)", func() error { var r *redis.Client; _, err := lockactor.New(r); return err }},
		{"zero watchdog", func() error { _, err := lockactor.New(rdb, lockactor.WithWatchdogTimeout(0)); return err }},
		{"negative watchdog", func() error { _, err := lockactor.New(rdb, lockactor.WithWatchdogTimeout(-time.Second)); return err }},
	}
	before := commandsProcessed(t, rdb)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, lockactor.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	// INFO itself is the one command between the two readings.
	if after := commandsProcessed(t, rdb); after != before+1 {
		t.Fatalf("bad input sent %d commands to Redis", after-before-1)
	}
	if err := c.Lock("x").Lock(ctx, lockactor.WithLease(-1)); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("error %v does not name the lock", err)
	}
}

// commandsProcessed reads the server's total_commands_processed.
func commandsProcessed(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return infoField(info, "total_commands_processed")
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

func TestLoggerGetsLostLocksNotActorChatter(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const wd = 600 * time.Millisecond
	l := newClient(t, srv.Client(t), lockactor.WithLogger(log), lockactor.WithWatchdogTimeout(wd)).Lock("logged")
	ctx := ctxFor(t, 10*time.Second)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, "logged")
	<-l.Lost()
	out := buf.String()
	if !strings.Contains(out, "lock lost") || !strings.Contains(out, "logged") {
		t.Fatalf("log lacks the lost lock:\n%s", out)
	}
	if strings.Contains(out, "actor system started") {
		t.Fatalf("protoactor's INFO chatter reached the logger:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestForceUnlockWakesLocalWaiter(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 20*time.Second)
	holder, waiter := c.Lock("forced"), c.Lock("forced")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lost := holder.Lost() // this hold's: after Unlock, Lost is the next hold's
	woke := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error {
		ok, err := c.Lock("forced").ForceUnlock(ctx)
		if !ok || err != nil {
			return fmt.Errorf("ForceUnlock = %v, %v", ok, err)
		}
		return nil
	})
	if woke > 300*time.Millisecond {
		t.Fatalf("local waiter woke %v after a force unlock (same Client as the holder)", woke)
	}
	if err := holder.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("forced-out holder's Unlock = %v, want ErrNotHeld", err)
	}
	select {
	case <-lost:
	default:
		t.Fatal("forced-out holder's Lost is open")
	}
}
