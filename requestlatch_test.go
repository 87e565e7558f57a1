package lockactor_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
)

// Tests of the latch (docs/PROTOCOL.md, "The latch"): how a request whose
// reply was lost is settled, whatever else the Client did meanwhile and
// however long Redis stayed out of reach.

// Lock(x), FencedLock(x) and ReadWriteLock(x) share the hash x but are
// separate actors of one Client. A lost reply on one is settled after
// another kind sent its own request on the name: the settlement must still
// learn that the request ran (before, one latch per name and Client was
// overwritten, the partial release was sent again, and another Client got
// a lock whose owner still counted a hold).
func TestLatchPerKindOfSharedName(t *testing.T) {
	lock := func(c *lockactor.Client) *lockactor.Lock { return c.Lock("shared-kind") }
	tests := []struct {
		name          string
		holder, other func(c *lockactor.Client) *lockactor.Lock
		unlock        *redis.Script // the holder's partial release
	}{
		{"lock, then fenced", lock, func(c *lockactor.Client) *lockactor.Lock { return c.FencedLock("shared-kind") }, scripts.Latched.Unlock},
		{"lock, then fair", lock, func(c *lockactor.Client) *lockactor.Lock { return c.FairLock("shared-kind") }, scripts.Latched.Unlock},
		{"write, then lock", func(c *lockactor.Client) *lockactor.Lock { return c.ReadWriteLock("shared-kind").WriteLock() }, lock, scripts.Latched.WriteUnlock},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb, hook := hooked(t, srv)
			c, rival := newClient(t, rdb), newClient(t, srv.Client(t))
			ctx := ctxFor(t, 20*time.Second)
			l := tc.holder(c)
			for range 2 {
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			hook.once(t, rdb, tc.unlock, faultRule{lose: true})
			resolve := hook.add(&faultRule{match: evalOf(scripts.Resolve.Hash()), times: -1, refuse: true})
			uctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_ = l.Unlock(uctx) // the partial release ran; its reply is lost
			cancel()
			// The other kind's actor sends its own latched request meanwhile.
			if ok, err := tc.other(c).TryLock(ctx); ok || err != nil {
				t.Fatalf("TryLock of the other kind = %v, %v; want refused (the lock is held)", ok, err)
			}
			hook.stop(resolve)
			time.Sleep(500 * time.Millisecond) // the settlement goes through
			if n, err := l.HoldCount(ctx); n != 1 || err != nil {
				t.Fatalf("HoldCount = %d, %v; want 1 (two holds, one released)", n, err)
			}
			if ok, err := rival.Lock("shared-kind").TryLock(ctx); ok || err != nil {
				t.Fatalf("another Client's TryLock = %v, %v while the handle still holds one hold", ok, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("last Unlock: %v", err)
			}
		})
	}
}

// A semaphore request whose reply was lost and whose settlement could not
// reach Redis for longer than its latch record lives is never settled as
// "did not run" (that sent a Release again: 3 permits of 2). The count may
// only err on the side of fewer permits.
func TestSemaphoreSettlementAfterLatchExpired(t *testing.T) {
	// Parallel: its own servers, and it mostly waits for records to expire.
	t.Parallel()
	tests := []struct {
		name   string
		script *redis.Script
		call   func(ctx context.Context, s *lockactor.Semaphore) error
		most   int // permits that may be available after it
	}{
		{"release", scripts.Latched.SemaphoreRelease, func(ctx context.Context, s *lockactor.Semaphore) error { return s.Release(ctx, 1) }, 2},
		// The caller is told of the lost reply and holds one permit; the
		// other may be lost to the semaphore (fewer, never more).
		{"acquire", scripts.Latched.SemaphoreAcquire, func(ctx context.Context, s *lockactor.Semaphore) error { return s.Acquire(ctx, 1) }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb, hook := hooked(t, srv)
			c := newClient(t, rdb, lockactor.WithLatchKeep(300*time.Millisecond))
			ctx := ctxFor(t, 20*time.Second)
			s := c.Semaphore("sem-outage")
			if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
				t.Fatalf("TrySetPermits = %v, %v", ok, err)
			}
			if err := s.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			hook.once(t, rdb, tc.script, faultRule{lose: true})
			resolve := hook.add(&faultRule{match: evalOf(scripts.Resolve.Hash()), times: -1, refuse: true})
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_ = tc.call(cctx, s)
			cancel()
			time.Sleep(time.Second) // longer than the latch record lives
			hook.stop(resolve)
			time.Sleep(2 * time.Second) // settled, and anything re-sent has run
			n, err := s.AvailablePermits(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n > tc.most {
				t.Fatalf("%d permits available of 2, want at most %d: a request that ran was applied twice", n, tc.most)
			}
		})
	}
}

// A replayed or settled request writes to the master (it refreshes its
// latch record), so that a WAIT after it on a fresh connection measures a
// write of this request on Redis 7.2 and later, where WAIT counts only the
// connection's own propagated writes.
func TestLatchReplayWrites(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxFor(t, 10*time.Second)
	latch := "lockactor_latch:{replay}:c:lock"
	run := func(keepMS int) {
		t.Helper()
		err := scripts.Latched.Lock.Run(ctx, rdb, []string{"replay", latch}, 30000, "c:1", 7, keepMS).Err()
		if err != nil && err.Error() != "redis: nil" {
			t.Fatal(err)
		}
	}
	run(1000)
	run(60000) // the same request again: a replay
	if ttl := rdb.PTTL(ctx, latch).Val(); ttl < 30*time.Second {
		t.Fatalf("latch TTL after a replay = %v; want it refreshed to ~60s (the replay wrote nothing)", ttl)
	}
	rdb.PExpire(ctx, latch, time.Second)
	if err := scripts.Resolve.Run(ctx, rdb, []string{latch}, 7, 60000).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, latch).Val(); ttl < 30*time.Second {
		t.Fatalf("latch TTL after settling a request that ran = %v; want it refreshed (the settlement wrote nothing)", ttl)
	}
}
