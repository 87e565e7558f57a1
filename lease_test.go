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

// Tests of fixed leases (WithLease): a grant is handed out only with time
// left on it, leases too short to be served are refused up front, and a
// group's actors retire once its lease is over.

// A release that hands the lock straight to a local waiter, whose reply
// comes back after the waiter's lease has run out, must not hand that
// waiter a hold Redis has already dropped: before, Lock returned nil with
// RemainingLease 0 and another Client's TryLock succeeded. Issue 17, item 1.
func TestLateHandoffIsNotHandedOut(t *testing.T) {
	srv := redistest.Start(t)
	rdb, hook := hooked(t, srv)
	c, rival := newClient(t, rdb), newClient(t, srv.Client(t))
	ctx := ctxFor(t, 20*time.Second)
	holder, waiter := c.Lock("late-handoff"), c.Lock("late-handoff")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	done := lockAsyncWith(ctx, waiter, lockactor.WithLease(400*time.Millisecond))
	time.Sleep(200 * time.Millisecond) // queued behind the holder
	hook.once(t, rdb, scripts.Latched.Handoff, faultRule{delay: 600 * time.Millisecond, after: true})
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := waitErr(t, done, 10*time.Second, "the waiter"); err != nil {
		t.Fatalf("waiter's Lock: %v", err)
	}
	if ok, err := rival.Lock("late-handoff").TryLock(ctx); ok || err != nil {
		t.Fatalf("another Client's TryLock = %v, %v right after the waiter's Lock returned: it was handed a hold already gone", ok, err)
	}
	if d, err := waiter.RemainingLease(ctx); d <= 0 || err != nil {
		t.Fatalf("RemainingLease = %v, %v; want time left", d, err)
	}
}

// A lease below MinLease is refused before anything is sent; before, a
// 1µs lease made TryLock return false and Lock send thousands of acquire
// and release scripts a second until its ctx ended. Issue 17, item 7.
func TestTinyLeaseRefused(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	ctx := ctxFor(t, 10*time.Second)
	l := c.Lock("tiny-lease")
	before := commandsProcessed(t, rdb)
	tests := []struct {
		name string
		call func() error
	}{
		{"TryLock", func() error { _, err := l.TryLock(ctx, lockactor.WithLease(time.Microsecond)); return err }},
		{"Lock", func() error {
			lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			return l.Lock(lctx, lockactor.WithLease(lockactor.MinLease-time.Nanosecond))
		}},
	}
	for _, tc := range tests {
		if err := tc.call(); !errors.Is(err, lockactor.ErrInvalidArgument) {
			t.Errorf("%s with a lease below MinLease = %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if n := commandsProcessed(t, rdb) - before; n > 2 {
		t.Errorf("%d commands reached Redis for refused calls", n)
	}
	if ok, err := l.TryLock(ctx, lockactor.WithLease(lockactor.MinLease*20)); !ok || err != nil {
		t.Fatalf("TryLock with a lease of 20 x MinLease = %v, %v", ok, err)
	}
}

// A MultiLock with a fixed lease whose round outlasts the lease must not be
// reported held: a member granted early has expired in Redis by the time the
// last member is granted. Each member checks only its own attempt's age,
// and an attempt can wait in its member's actor first (here behind another
// handle's Unlock whose reply is late). Only RedLock rounds were checked
// against their lease: MultiLock.Lock returned nil with a member already
// gone, and another Client took it (found by the torture suite's
// ghost-grant probe).
func TestMultiLockRoundLongerThanLease(t *testing.T) {
	srv := redistest.Start(t)
	slow, hook := hooked(t, srv)
	fast := newClient(t, srv.Client(t))
	late := newClient(t, slow)
	rival := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 20*time.Second)
	const lease = 300 * time.Millisecond
	other := late.Lock("ml-late")
	if err := other.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// The late member's actor is busy with other's release, whose reply
	// comes back two leases after it ran.
	hook.once(t, slow, scripts.Latched.Unlock, faultRule{delay: 2 * lease, after: true})
	unlocked := make(chan error, 1)
	go func() { unlocked <- other.Unlock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	ml := lockactor.NewMultiLock(fast.Lock("ml-early"), late.Lock("ml-late"))
	start := time.Now()
	if err := ml.Lock(ctx, lockactor.WithLease(lease)); err != nil {
		t.Fatalf("MultiLock.Lock: %v", err)
	}
	took := time.Since(start)
	if ok, err := rival.Lock("ml-early").TryLock(ctx); ok || err != nil {
		t.Fatalf("another Client's TryLock of the early member = %v, %v right after MultiLock.Lock returned (after %v): the member had expired", ok, err, took)
	}
	if err := waitErr(t, unlocked, 5*time.Second, "other's Unlock"); err != nil {
		t.Fatal(err)
	}
	if took < lease {
		t.Fatalf("MultiLock.Lock returned after %v, within the lease: the busy member was not exercised", took)
	}
}

// A MultiLock held with a fixed lease lets its coordinator (and its members'
// actors) retire once the lease is over.
func TestFixedLeaseGroupCoordinatorRetires(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t), lockactor.WithIdleActorTimeout(100*time.Millisecond))
	ctx := ctxFor(t, 20*time.Second)
	m := lockactor.NewMultiLock(c.Lock("g-a"), c.Lock("g-b"))
	if err := m.Lock(ctx, lockactor.WithLease(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n := lockactor.ActorCount(c); n < 3 {
		t.Fatalf("%d actors while held, want 3 (coordinator and two members)", n)
	}
	within(t, 3*time.Second, "every actor retired after the lease", func() bool { return lockactor.ActorCount(c) == 0 })
	if err := m.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock after the lease = %v, want ErrNotHeld", err)
	}
}
