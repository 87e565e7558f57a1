//go:build full

package lockactor_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// A server whose users may not publish (an ACL): SpinLock's publish option,
// and every kind's state change applied once when its publish is refused.

// TestSpinPublishOption checks, on a server that allows pub/sub, what each
// setting of WithSpinPublish sends on the lock's channel: the default
// publishes on a SpinLock's release and ForceUnlock, so a Lock waiter of
// another Client wakes at once (the holder's lease is the 30 s default:
// only the message can wake it that soon); WithSpinPublish(false) sends
// nothing, and the Lock waiter takes the lock at its next retry, within
// the holder's lease (1 s here) and a margin for a shared machine.
func TestSpinPublishOption(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, tc := range []struct {
		name     string
		opts     []lockactor.Option
		publish  bool
		wakeIn   time.Duration
		watchdog time.Duration
	}{
		{"default publishes", nil, true, 2 * time.Second, 30 * time.Second},
		{"WithSpinPublish(false) is quiet", []lockactor.Option{lockactor.WithSpinPublish(false)}, false, time.Second + 3*time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			name := "spin-publish-" + strconv.FormatBool(tc.publish)
			c := newClient(t, srv.Client(t), append([]lockactor.Option{lockactor.WithWatchdogTimeout(tc.watchdog)}, tc.opts...)...)
			sub := admin.Subscribe(ctx, "redisson_lock__channel:{"+name+"}")
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			messages := sub.Channel()
			expectMessage := func(what string) {
				t.Helper()
				wait := 300 * time.Millisecond
				if tc.publish {
					wait = 3 * time.Second
				}
				select {
				case m := <-messages:
					if !tc.publish {
						t.Fatalf("%s published %q", what, m.Payload)
					}
				case <-time.After(wait):
					if tc.publish {
						t.Fatalf("%s published nothing", what)
					}
				}
			}

			l := c.SpinLock(name)
			for range 2 { // reentrant: the first Unlock frees nothing
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			expectMessage("Unlock")
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, err := c.SpinLock(name).ForceUnlock(ctx); !ok || err != nil {
				t.Fatalf("ForceUnlock = %v, %v", ok, err)
			}
			expectMessage("ForceUnlock")
			select {
			case m := <-messages:
				t.Fatalf("an extra message %q", m.Payload)
			default:
			}

			holder := c.SpinLock(name + "-wake")
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			waiter := newClient(t, srv.Client(t)).Lock(name + "-wake")
			woke := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error { return holder.Unlock(ctx) })
			t.Logf("the Lock waiter took the lock %v after the SpinLock's Unlock", woke)
			if woke > tc.wakeIn {
				t.Fatalf("the Lock waiter took the lock %v after the release, want within %v", woke, tc.wakeIn)
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

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
