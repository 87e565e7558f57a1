package lockactor_test

// The plain reentrant Lock (Client.Lock): its Redis layout, mutual
// exclusion, watchdog, wake-ups and leases. TestMain and the helpers the
// suite shares are in actors_test.go.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

func TestReentrancyLayout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb, lockactor.WithWatchdogTimeout(5*time.Second))
	ctx := ctxFor(t, 10*time.Second)
	l := c.Lock("orders")
	field := fmt.Sprintf("%s:", c.ID())

	for want := 1; want <= 3; want++ {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock #%d: %v", want, err)
		}
		h, err := rdb.HGetAll(ctx, "orders").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 1 {
			t.Fatalf("hash = %v, want one field", h)
		}
		for k, v := range h {
			if len(k) <= len(field) || k[:len(field)] != field {
				t.Fatalf("field %q does not start with %q", k, field)
			}
			if v != fmt.Sprint(want) {
				t.Fatalf("hold count = %s, want %d", v, want)
			}
		}
		if n, _ := l.HoldCount(ctx); n != want {
			t.Fatalf("HoldCount = %d, want %d", n, want)
		}
		if d := rdb.PTTL(ctx, "orders").Val(); d <= 0 || d > 5*time.Second {
			t.Fatalf("PTTL = %v, want in (0, 5s]", d)
		}
	}
	if d, _ := l.RemainingLease(ctx); d <= 0 || d > 5*time.Second {
		t.Fatalf("RemainingLease = %v", d)
	}
	for left := 2; left >= 0; left-- {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if n, _ := l.HoldCount(ctx); n != left {
			t.Fatalf("HoldCount after Unlock = %d, want %d", n, left)
		}
	}
	if n := rdb.Exists(ctx, "orders").Val(); n != 0 {
		t.Fatal("key left behind after the last Unlock")
	}
	if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("extra Unlock = %v, want ErrNotHeld", err)
	}
	if locked, _ := l.IsLocked(ctx); locked {
		t.Fatal("IsLocked after full release")
	}
}

func TestMutualExclusionAcrossClients(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	contend(t, srv, 3, 40, 5, func(c *lockactor.Client) lockactor.Locker { return c.Lock("shared") })
}

func TestWatchdogKeepsLockPastTimeout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const wd = 900 * time.Millisecond
	holder := newClient(t, srv.Client(t), lockactor.WithWatchdogTimeout(wd)).Lock("wd")
	other := newClient(t, srv.Client(t)).Lock("wd")
	ctx := ctxFor(t, 10*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tries := 0
	for time.Since(start) < 3*wd {
		ok, err := other.TryLock(ctx)
		if err != nil || ok {
			t.Fatalf("TryLock by another client after %v = %v, %v; want false", time.Since(start), ok, err)
		}
		tries++
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-holder.Lost():
		t.Fatal("Lost closed while the watchdog was renewing")
	default:
	}
	if n, _ := holder.HoldCount(ctx); n != 1 {
		t.Fatalf("holder's HoldCount after 3x the timeout = %d", n)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock after Unlock = %v, %v", ok, err)
	}
	t.Logf("%d refused tries over %v", tries, time.Since(start))
}

func TestWaiterWakesOnUnlockMessage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder := newClient(t, srv.Client(t)).Lock("wake")
	waiter := newClient(t, srv.Client(t)).Lock("wake")
	ctx := ctxFor(t, 20*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	woke := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error { return holder.Unlock(ctx) })
	if woke > 300*time.Millisecond {
		t.Fatalf("waiter woke %v after Unlock, want <= 300ms", woke)
	}
	t.Logf("waiter woke %v after Unlock", woke)
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseExpiryThenUnlockIsNotHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	l := c.Lock("lease")
	if err := l.Lock(ctx, lockactor.WithLease(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.RemainingLease(ctx); d <= 0 || d > 200*time.Millisecond {
		t.Fatalf("RemainingLease = %v, want in (0, 200ms]", d)
	}
	other := c.Lock("lease")
	ok, err := other.TryLock(ctx, lockactor.WithWait(2*time.Second))
	if !ok || err != nil {
		t.Fatalf("TryLock after the lease = %v, %v", ok, err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock after the lease ran out = %v, want ErrNotHeld", err)
	}
	if n, _ := other.HoldCount(ctx); n != 1 {
		t.Fatal("the expired holder's Unlock touched the new holder's lock")
	}
}

func TestAbandonedLockIsTakenAfterTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const wd = 800 * time.Millisecond
	crashed, err := lockactor.New(srv.Client(t), lockactor.WithWatchdogTimeout(wd))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 10*time.Second)
	if err := crashed.Lock("abandoned").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(wd / 2) // at least one renewal
	_ = crashed.Close()
	closedAt := time.Now()

	taker := newClient(t, srv.Client(t)).Lock("abandoned")
	if ok, _ := taker.TryLock(ctx); ok {
		t.Fatal("lock free right after Close: Close must not release held locks")
	}
	if err := taker.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(closedAt)
	if took > wd+time.Second {
		t.Fatalf("abandoned lock taken %v after Close, want within the TTL (%v) + 1s", took, wd)
	}
	t.Logf("taken %v after Close", took)
}

func TestLostClosesWhenKeyDeleted(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const wd = 900 * time.Millisecond
	l := newClient(t, rdb, lockactor.WithWatchdogTimeout(wd)).Lock("stolen")
	ctx := ctxFor(t, 10*time.Second)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lost := l.Lost()
	rdb.Del(ctx, "stolen")
	select {
	case <-lost:
	case <-time.After(wd/3 + time.Second):
		t.Fatal("Lost did not close after the key was deleted")
	}
	if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock after loss = %v, want ErrNotHeld", err)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
		t.Fatal("a new acquisition must get a fresh Lost channel")
	default:
	}
}

// An Unlock whose ctx had ended gives the hold up all the same; its error
// says the release goes on (ErrReleasePending) as well as matching the
// ctx's. Before, it said only "context canceled" while the lock was
// released 50ms later: every job that timed out logged a false failure.
func TestUnlockWithEndedCtxSaysReleasePending(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	l := c.Lock("ended-ctx")
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	jobCtx, cancel := context.WithCancel(ctx)
	cancel()
	err := l.Unlock(jobCtx)
	if err != nil && (!errors.Is(err, lockactor.ErrReleasePending) || !errors.Is(err, context.Canceled)) {
		t.Fatalf("Unlock with an ended ctx = %v, want nil or ErrReleasePending matching context.Canceled", err)
	}
	within(t, 2*time.Second, "the lock released", func() bool { return admin.Exists(ctx, "ended-ctx").Val() == 0 })
	if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("a second Unlock = %v, want ErrNotHeld (the hold was given up)", err)
	}
}

func TestTryLockWaitTimesOut(t *testing.T) {
	t.Parallel()
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

func TestForceUnlockWakesLocalWaiter(t *testing.T) {
	t.Parallel()
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
