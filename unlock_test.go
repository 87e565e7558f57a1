package lockactor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
)

// Tests of Unlock when Redis does not confirm the release at once: the
// release stays owed to Redis and is retried, and neither the caller nor a
// later hold of the same handle may pay for it.

// A release refused for longer than the hold's fixed lease stays owed; the
// same handle then locks again. The owed release must not reach Redis after
// that newer grant to the same owner (the hash field is the same for both
// holds, so Redis would delete the new hold and another Client would get
// the lock).
func TestOwedReleaseSparesNewerHoldOfSameHandle(t *testing.T) {
	srv := redistest.Start(t)
	rdb, hook := hooked(t, srv)
	c, other := newClient(t, rdb), newClient(t, srv.Client(t))
	ctx := ctxFor(t, 20*time.Second)
	l := c.Lock("owed-relock")
	if err := l.Lock(ctx, lockactor.WithLease(time.Second)); err != nil {
		t.Fatal(err)
	}
	refuse := hook.add(&faultRule{match: evalOf(scripts.Latched.Unlock.Hash()), times: -1, refuse: true})
	uctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_ = l.Unlock(uctx) // fails one way or another: Redis never saw it
	cancel()
	// Lock again as soon as the first hold's lease has run out in Redis,
	// while its release is still owed.
	for {
		ok, err := l.TryLock(ctx, lockactor.WithLease(10*time.Second))
		if err != nil {
			t.Fatalf("TryLock again: %v", err)
		}
		if ok {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	hook.stop(refuse)                   // the old release may go through from now on
	time.Sleep(1500 * time.Millisecond) // the owed release is retried within a third of its lease
	if ok, err := other.Lock("owed-relock").TryLock(ctx); ok || err != nil {
		t.Fatalf("another Client's TryLock = %v, %v while the handle holds a 10s lease: the stale release freed it", ok, err)
	}
	if n, err := l.HoldCount(ctx); n != 1 || err != nil {
		t.Fatalf("HoldCount = %d, %v; want 1", n, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the newer hold: %v", err)
	}
}

// Unlock is answered even when every release attempt fails with an error
// that leaves open whether it ran, and settlement says it did not: before,
// the retry path never answered and Unlock waited for its ctx.
func TestUnlockAnsweredWhenReleaseKeepsFailing(t *testing.T) {
	tests := []struct {
		name string
		opts []lockactor.LockOption
	}{
		{"fixed lease", []lockactor.LockOption{lockactor.WithLease(500 * time.Millisecond)}},
		{"watchdog", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb, hook := hooked(t, srv)
			c := newClient(t, rdb, lockactor.WithWatchdogTimeout(2*time.Second))
			ctx := ctxFor(t, 20*time.Second)
			l := c.Lock("unlock-answered")
			if err := l.Lock(ctx, tc.opts...); err != nil {
				t.Fatal(err)
			}
			hook.add(&faultRule{match: evalOf(scripts.Latched.Unlock.Hash()), times: -1, refuse: true})
			uctx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			start := time.Now()
			err := l.Unlock(uctx)
			took := time.Since(start)
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Unlock = %v after %v; want the Redis error (or ErrNotHeld) before its ctx ends", err, took)
			}
			if took > 5*time.Second {
				t.Fatalf("Unlock took %v", took)
			}
			t.Logf("Unlock = %v after %v", err, took)
		})
	}
}

// A final release whose reply is lost, and whose settlement fails for
// longer than a short-lived latch record would have lived, is still learnt
// to have run: the hold was released, so Lost stays open and nothing is
// sent again.
func TestLateSettlementOfFinalRelease(t *testing.T) {
	// Parallel: its own server, and it mostly sleeps.
	t.Parallel()
	if testing.Short() {
		t.Skip("waits 6s for a settlement; skipped with -short")
	}
	srv := redistest.Start(t)
	rdb, hook := hooked(t, srv)
	c := newClient(t, rdb)
	ctx := ctxFor(t, 30*time.Second)
	l := c.Lock("late-settle")
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lost := l.Lost()
	unlock := hook.once(t, rdb, scripts.Latched.Unlock, faultRule{lose: true})
	resolve := hook.add(&faultRule{match: evalOf(scripts.Resolve.Hash()), times: -1, refuse: true})
	uctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_ = l.Unlock(uctx)
	cancel()
	time.Sleep(6 * time.Second)
	hook.stop(resolve)
	time.Sleep(2 * time.Second)
	select {
	case <-lost:
		t.Fatal("Lost closed after a release that ran: the late settlement sent it again")
	default:
	}
	if n := hook.count(unlock); n != 1 {
		t.Fatalf("the release was sent %d times, want 1", n)
	}
}
