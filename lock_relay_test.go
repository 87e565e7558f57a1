package lockactor_test

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestRelayPassesTheHoldWithoutAScript: with relays on (the default), a
// watchdog hold that Redis confirmed while the Client listened on the
// lock's channel passes from one handle of a Client to another waiting one
// with no script; Redis keeps it under that owner's field until the last
// owner releases it, and each handle's HoldCount is its own. With relays
// off the same hand-off is one script, and the field moves.
func TestRelayPassesTheHoldWithoutAScript(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		relay   bool
		scripts int64 // between the second holder's Unlock and the third's grant
	}{
		{"relay", true, 0},
		{"no relay", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client(t)
			// A run long enough that a loaded machine does not end it
			// between the hand-offs this test counts.
			c := newClient(t, srv.Client(t), lockactor.WithRelay(tc.relay), lockactor.WithRunTime(time.Minute))
			ctx := ctxFor(t, 10*time.Second)
			holder, first, second := c.Lock("relay"), c.Lock("relay"), c.Lock("relay")
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			// The first waiter subscribes after the holder's grant: a force
			// unlock in between would have gone unheard, so the first
			// hand-off asks Redis (handoff.lua), which confirms first's
			// hold under its own field. It waits for the subscription's
			// confirmation, after which relays may go (before it, the
			// hand-off asks Redis all the same).
			done := lockAsync(ctx, first)
			within(t, 2*time.Second, "the first waiter queued", func() bool { return lockactor.QueuedLock(c, "relay") >= 1 })
			within(t, 2*time.Second, "the subscription confirmed", func() bool { return lockactor.ListeningLock(c, "relay") })
			before := evalshaCalls(t, admin)
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := waitErr(t, done, 2*time.Second, "the first waiter"); err != nil {
				t.Fatal(err)
			}
			if n := evalshaCalls(t, admin) - before; n != 1 {
				t.Errorf("%d scripts for the first hand-off, want 1", n)
			}
			// The second waiter queues while the subscription stands.
			done = lockAsync(ctx, second)
			within(t, 2*time.Second, "the second waiter queued", func() bool { return lockactor.QueuedLock(c, "relay") >= 1 })
			before = evalshaCalls(t, admin)
			if err := first.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := waitErr(t, done, 2*time.Second, "the second waiter"); err != nil {
				t.Fatal(err)
			}
			if n := evalshaCalls(t, admin) - before; n != tc.scripts {
				t.Errorf("%d scripts for the second hand-off, want %d", n, tc.scripts)
			}
			field := lockactor.OwnerOf(first)
			if !tc.relay {
				field = lockactor.OwnerOf(second)
			}
			if got := admin.HGetAll(ctx, "relay").Val(); len(got) != 1 || got[field] != "1" {
				t.Errorf("lock hash = %v, want only %s with one hold", got, field)
			}
			for _, h := range []struct {
				l    *lockactor.Lock
				want int
			}{{holder, 0}, {first, 0}, {second, 1}} {
				if n, err := h.l.HoldCount(ctx); n != h.want || err != nil {
					t.Errorf("HoldCount = %d, %v; want %d", n, err, h.want)
				}
			}
			if err := second.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if n := admin.Exists(ctx, "relay").Val(); n != 0 {
				t.Errorf("the lock is still in Redis after the last Unlock")
			}
		})
	}
}

// TestForceUnlockEndsARelayedHold: a ForceUnlock from another Client frees
// the lock in Redis while a relayed hold lives. When a waiter of the
// relaying Client then gets the lock from Redis, the relayed holder's Lost
// closes at once (its hold was gone), and its Unlock does not pass the
// hold nobody has to the next waiter: the next owner gets the lock only
// when the current one releases it.
func TestForceUnlockEndsARelayedHold(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	other := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	first, relayed, fresh, next := c.Lock("forced"), c.Lock("forced"), c.Lock("forced"), c.Lock("forced")
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	relayedDone := lockAsync(ctx, relayed)
	within(t, 2*time.Second, "the waiter queued", func() bool { return lockactor.QueuedLock(c, "forced") >= 1 })
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, relayedDone, 2*time.Second, "the relayed owner"); err != nil {
		t.Fatal(err)
	}
	freshDone := lockAsync(ctx, fresh)
	within(t, 2*time.Second, "the second waiter queued", func() bool { return lockactor.QueuedLock(c, "forced") >= 1 })
	if ok, err := other.Lock("forced").ForceUnlock(ctx); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	if err := waitErr(t, freshDone, 2*time.Second, "the waiter after the force unlock"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-relayed.Lost():
	case <-time.After(time.Second):
		t.Fatal("the relayed holder's Lost is still open although another owner of its Client got the lock from Redis")
	}
	nextDone := lockAsync(ctx, next)
	within(t, 2*time.Second, "the third waiter queued", func() bool { return lockactor.QueuedLock(c, "forced") >= 1 })
	_ = relayed.Unlock(ctx) // its hold is gone: ErrNotHeld, or nil if the release raced the Lost
	select {
	case err := <-nextDone:
		t.Fatalf("the next owner got the lock (%v) while %s still holds it", err, lockactor.OwnerOf(fresh))
	case <-time.After(200 * time.Millisecond):
	}
	if err := fresh.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, nextDone, 2*time.Second, "the next owner"); err != nil {
		t.Fatal(err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
