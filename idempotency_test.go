package lockactor_test

// Regression tests for what the torture suite found on the earlier runtime:
// scripts applied twice or with their reply lost left hold counts that no
// handle owned, renewed forever. Every state-changing script now runs
// latched, so a lost reply is settled by asking Redis and a re-sent copy is
// applied once.

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
)

// An acquire whose reply is lost after it ran is learned from its latch:
// the call is granted once, and the hold count is what the handle holds.
func TestLostAcquireReplyIsSettled(t *testing.T) {
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

// A release handed to the next local waiter in one script, whose reply is
// lost: the waiter gets the lock once, and nothing is left behind.
func TestLostHandoffReplyIsSettled(t *testing.T) {
	srv := redistest.Start(t)
	rdb, hook := hooked(t, srv)
	c := newClient(t, rdb)
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
