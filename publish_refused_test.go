package lockactor_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
)

// TestPublishRefusedAppliesOnce: on a server whose user may not publish
// (an ACL: no channels, or no PUBLISH command), every kind's state change
// applies exactly once and its call succeeds. Each script publishes after
// its writes; a refused publish used to fail the script there, with the
// writes made and no latch record, and the runtime's retries applied them
// again: one Semaphore Release gave back 6 permits, TrySetPermits and
// TrySetCount reported an error for a count they had set, a CountDown
// counted the latch to nothing, a write Unlock said ErrNotHeld.
func TestPublishRefusedAppliesOnce(t *testing.T) {
	srv := startSpinACL(t)
	admin := srv.Client(t)
	for _, u := range spinACLs {
		t.Run(u.user, func(t *testing.T) {
			ctx := ctxFor(t, 20*time.Second)
			c := newClient(t, asUser(t, srv, u.user))
			name := func(kind string) string { return u.user + ":" + kind }
			count := func(key string) string { return admin.Get(context.Background(), key).Val() }

			sem := c.Semaphore(name("sem"))
			if ok, err := sem.TrySetPermits(ctx, 2); !ok || err != nil {
				t.Fatalf("Semaphore.TrySetPermits(2) = %v, %v", ok, err)
			}
			if err := sem.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := sem.Release(ctx, 1); err != nil {
				t.Fatalf("Semaphore.Release: %v", err)
			}
			if got := count(sem.Name()); got != "2" {
				t.Errorf("Semaphore count after acquire and release %q, want 2", got)
			}

			ps := c.PermitSemaphore(name("permit"))
			if ok, err := ps.TrySetPermits(ctx, 2); !ok || err != nil {
				t.Fatalf("PermitSemaphore.TrySetPermits(2) = %v, %v", ok, err)
			}
			id, err := ps.Acquire(ctx, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := ps.Release(ctx, id); err != nil {
				t.Fatalf("PermitSemaphore.Release: %v", err)
			}
			if n, err := ps.AvailablePermits(ctx); n != 2 || err != nil {
				t.Errorf("permits available after acquire and release %d, %v; want 2", n, err)
			}

			latch := c.CountDownLatch(name("latch"))
			if ok, err := latch.TrySetCount(ctx, 2); !ok || err != nil {
				t.Fatalf("TrySetCount(2) = %v, %v", ok, err)
			}
			if err := latch.CountDown(ctx); err != nil {
				t.Fatalf("CountDown: %v", err)
			}
			if n, err := latch.Count(ctx); n != 1 || err != nil {
				t.Errorf("count after one CountDown of 2: %d, %v; want 1", n, err)
			}

			rw := c.ReadWriteLock(name("rw"))
			for _, view := range []lockactor.Locker{rw.WriteLock(), rw.ReadLock()} {
				if err := view.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := view.Unlock(ctx); err != nil {
					t.Errorf("ReadWriteLock Unlock: %v", err)
				}
			}
			fair := c.FairLock(name("fair"))
			if err := fair.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := fair.Unlock(ctx); err != nil {
				t.Errorf("FairLock Unlock: %v", err)
			}
			for _, key := range []string{name("rw"), fair.Name()} {
				if n := admin.Exists(context.Background(), key).Val(); n != 0 {
					t.Errorf("%s still exists after its Unlock", key)
				}
			}
		})
	}
}
