package lockactor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
)

// Tests of the request latch (docs/PROTOCOL.md, "The latch") against a real
// server: every state-changing script runs latched, so a request whose reply
// was lost is settled by asking Redis, whatever else the Client did
// meanwhile and however long Redis stayed out of reach, and a copy go-redis
// sends again is applied once. (What the actors decide with a settlement's
// answer is in actors/*_test.go.)

// Lock(x), FencedLock(x) and ReadWriteLock(x) share the hash x but are
// separate actors of one Client. A lost reply on one is settled after
// another kind sent its own request on the name: the settlement must still
// learn that the request ran (before, one latch per name and Client was
// overwritten, the partial release was sent again, and another Client got
// a lock whose owner still counted a hold).
func TestLatchPerKindOfSharedName(t *testing.T) {
	t.Parallel()
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

// An acquire whose reply is lost after it ran is learned from its latch:
// the call is granted once, and the hold count is what the handle holds.
func TestLostAcquireReplyIsSettled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script *redis.Script
		handle func(c *lockactor.Client) *lockactor.Lock
		holds  int // Lock calls before the one whose reply is lost
	}{
		{"lock", scripts.Latched.Lock, func(c *lockactor.Client) *lockactor.Lock { return c.Lock("lost-acq") }, 0},
		{"reentrant lock", scripts.Latched.Lock, func(c *lockactor.Client) *lockactor.Lock { return c.Lock("lost-acq") }, 2},
		{"fenced", scripts.Latched.FencedLock, func(c *lockactor.Client) *lockactor.Lock { return c.FencedLock("lost-acq") }, 0},
		{"fair", scripts.Latched.FairLock, func(c *lockactor.Client) *lockactor.Lock { return c.FairLock("lost-acq") }, 0},
		{"read", scripts.Latched.ReadLock, func(c *lockactor.Client) *lockactor.Lock { return c.ReadWriteLock("lost-acq").ReadLock() }, 0},
		{"write", scripts.Latched.WriteLock, func(c *lockactor.Client) *lockactor.Lock { return c.ReadWriteLock("lost-acq").WriteLock() }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb, hook := hooked(t, srv)
			c := newClient(t, rdb)
			ctx := ctxFor(t, 10*time.Second)
			l := tc.handle(c)
			for range tc.holds {
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			hook.once(t, rdb, tc.script, faultRule{lose: true})
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock with its reply lost = %v, want granted (the latch says it ran)", err)
			}
			if n, _ := l.HoldCount(ctx); n != tc.holds+1 {
				t.Fatalf("HoldCount = %d, want %d", n, tc.holds+1)
			}
			for range tc.holds + 1 {
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := srv.Client(t).Exists(ctx, "lost-acq").Val(); n != 0 {
				t.Fatalf("lock key left after every hold was released: %v", srv.Client(t).HGetAll(ctx, "lost-acq").Val())
			}
		})
	}
}

// A release handed to the next local waiter in one script (relays off),
// whose reply is lost: the waiter gets the lock once, and nothing is left
// behind.
func TestLostHandoffReplyIsSettled(t *testing.T) {
	srv := redistest.Start(t)
	rdb, hook := hooked(t, srv)
	c := newClient(t, rdb, lockactor.WithRelay(false))
	ctx := ctxFor(t, 10*time.Second)
	holder, next := c.Lock("lost-handoff"), c.Lock("lost-handoff")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	done := lockAsync(ctx, next)
	time.Sleep(100 * time.Millisecond)
	handoff := hook.once(t, rdb, scripts.Latched.Handoff, faultRule{lose: true})
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock whose hand-off reply was lost = %v", err)
	}
	if err := waitErr(t, done, 2*time.Second, "the next waiter"); err != nil {
		t.Fatal(err)
	}
	if hook.count(handoff) != 1 {
		t.Fatalf("%d hand-off scripts, want 1", hook.count(handoff))
	}
	fields := srv.Client(t).HGetAll(ctx, "lost-handoff").Val()
	if len(fields) != 1 || fields[lockactor.OwnerOf(next)] != "1" {
		t.Fatalf("lock hash = %v, want only the next owner with one hold", fields)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// go-redis sends a script again on a new connection when the first one
// breaks after the script ran (here a proxy cuts it as the reply begins).
// The copy is applied once: a reentrant Unlock drops one hold, not two; a
// TryLock takes one; a semaphore Release gives back its permits once.
func TestResentScriptIsAppliedOnce(t *testing.T) {
	srv := redistest.Start(t)
	srv.NeedsReal(t, "INFO commandstats, to count the scripts the server ran")
	proxy := redistest.NewProxy(t, srv.Addr())
	c := newClient(t, proxy.Client(t)) // default go-redis options: retries on
	admin := srv.Client(t)
	ctx := ctxFor(t, 10*time.Second)
	cutOn := func(sha string) <-chan struct{} {
		return proxy.CutAfter(func(args []string) bool {
			return len(args) > 1 && args[0] == "EVALSHA" && args[1] == sha
		})
	}
	evalshas := func() int64 { return evalshaCalls(t, admin) }
	// resent runs call with a cut after the script sha and checks that the
	// server did run it twice.
	resent := func(what, sha string, call func() error) {
		t.Helper()
		before := evalshas()
		cut := cutOn(sha)
		if err := call(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		<-cut
		if n := evalshas() - before; n < 2 {
			t.Fatalf("%s: the server ran %d script(s); the cut should have made go-redis send it again", what, n)
		}
	}

	l := c.Lock("resent")
	for range 3 {
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	resent("Unlock", scripts.Latched.Unlock.Hash(), func() error { return l.Unlock(ctx) })
	if n, _ := l.HoldCount(ctx); n != 2 {
		t.Fatalf("after one Unlock of 3 holds, re-sent: HoldCount = %d, want 2", n)
	}
	for range 2 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	resent("TryLock", scripts.Latched.Lock.Hash(), func() error {
		if ok, err := l.TryLock(ctx); !ok || err != nil {
			return fmt.Errorf("TryLock = %v, %v", ok, err)
		}
		return nil
	})
	if n, _ := l.HoldCount(ctx); n != 1 {
		t.Fatalf("after one TryLock, re-sent: HoldCount = %d, want 1", n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if admin.Exists(ctx, "resent").Val() != 0 {
		t.Fatal("a hold nobody owns was left behind")
	}

	s := c.Semaphore("resent-sem")
	if ok, err := s.TrySetPermits(ctx, 0); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	resent("Release", scripts.Latched.SemaphoreRelease.Hash(), func() error { return s.Release(ctx, 2) })
	if n, _ := s.AvailablePermits(ctx); n != 2 {
		t.Fatalf("after one Release(2), re-sent: %d permits, want 2", n)
	}
}
