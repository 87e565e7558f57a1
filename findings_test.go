package lockactor_test

// Regression tests for a review of the scripts and the group coordinator:
// a read unlock that shortened a write hold, a late RedLock grant that was
// kept, and Lock honouring WithWait.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

// A read unlock must not shorten a write hold's TTL: once read_unlock
// recomputed the hash's TTL from the remaining read holds alone (the write
// hold has no rwlock_timeout key), so a short-lease read hold taken under a
// write hold let another writer in ~200 ms after a read unlock.
func TestReadUnlockKeepsWriteHoldTTL(t *testing.T) {
	tests := []struct {
		name  string
		write []lockactor.LockOption // how the write hold is taken
	}{
		{"watchdog", nil},
		{"long lease", []lockactor.LockOption{lockactor.WithLease(20 * time.Second)}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			ctx := ctxFor(t, 20*time.Second)
			name := "rw-short-read-" + string(rune('a'+i))
			rw := newClient(t, srv.Client(t)).ReadWriteLock(name)
			if err := rw.WriteLock().Lock(ctx, tt.write...); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := rw.ReadLock().Lock(ctx, lockactor.WithLease(200*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
			}
			if err := rw.ReadLock().Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(400 * time.Millisecond)
			other := newClient(t, srv.Client(t)).ReadWriteLock(name).WriteLock()
			if ok, err := other.TryLock(ctx); ok || err != nil {
				t.Fatalf("another writer's TryLock during the first write hold = %v, %v (hash PTTL now %v)",
					ok, err, srv.Client(t).PTTL(ctx, name).Val())
			}
			select {
			case <-rw.WriteLock().Lost():
				t.Fatal("the write hold's Lost closed after a read unlock")
			default:
			}
			if err := rw.WriteLock().Unlock(ctx); err != nil {
				t.Fatalf("write Unlock: %v", err)
			}
		})
	}
}

// A RedLock member that answers after the node timeout, when the RedLock was
// taken on the others, must not keep its grant for the lease: the member's
// actor sees the request abandoned and gives the grant back, also when the
// reply is lost to go-redis's read timeout and the grant is learnt from the
// latch. Another owner can then take that node's lock shortly after it
// wakes, while the RedLock still holds.
func TestRedLockLateMemberGrantIsReleased(t *testing.T) {
	tests := []struct {
		name        string
		pause       time.Duration
		readTimeout time.Duration // go-redis's; 0: default (3s)
		settled     []string      // how the late node's latch may end
	}{
		// The reply arrives: the grant is applied, then released.
		{"answer after the node timeout", 300 * time.Millisecond, 0, []string{":i1"}},
		// The reply is lost: the settlement finds the grant and releases
		// it, or cancels the request before it runs (whichever the woken
		// server runs first).
		{"reply lost to the read timeout", 1500 * time.Millisecond, 500 * time.Millisecond, []string{":i1", ":c"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers := redistest.StartN(t, 3)
			clients := make([]*lockactor.Client, len(servers))
			for i, s := range servers {
				rdb := s.ClientWith(t, func(o *redis.Options) {
					o.MaxRetries = -1
					o.DialerRetries = 1
					if tt.readTimeout > 0 {
						o.ReadTimeout = tt.readTimeout
					}
				})
				clients[i] = newClient(t, rdb)
			}
			ctx := ctxFor(t, 20*time.Second)
			name := "rl-late-" + string(rune('a'+i))
			rl, _ := redLockOn(clients, name)
			late := servers[2]
			late.Pause(t)
			if ok, err := rl.TryLock(ctx); !ok || err != nil {
				t.Fatalf("RedLock with 1 of 3 frozen = %v, %v", ok, err)
			}
			time.Sleep(tt.pause)
			late.Resume(t)
			// The late node settles the queued request: it applies the grant
			// and the member's actor gives it back (the latch then records
			// the release, "<seq>:i1"), or the request is cancelled before
			// it ran ("<seq>:c").
			lrdb := late.Client(t)
			var settled string
			within(t, 3*time.Second, "the late request settled", func() bool {
				for _, k := range lrdb.Keys(ctx, "lockactor_latch:*").Val() {
					v := lrdb.Get(ctx, k).Val()
					for _, want := range tt.settled {
						if strings.HasSuffix(v, want) {
							settled = v
							return true
						}
					}
				}
				return false
			})
			t.Logf("the late node's latch: %q", settled)

			other := newClient(t, late.Client(t)).Lock(name)
			took := within(t, 3*time.Second, "the late node's lock taken by another owner", func() bool {
				ok, err := other.TryLock(ctx)
				if err != nil {
					t.Fatalf("other TryLock: %v", err)
				}
				return ok
			})
			t.Logf("the late node was free %v after the late request settled", took)
			if rl.Validity() <= 0 {
				t.Fatal("the RedLock lost its validity")
			}
			if err := other.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := rl.Unlock(ctx); err != nil {
				t.Fatalf("RedLock Unlock: %v", err)
			}
		})
	}
}

// Lock ignores WithWait for every kind, as its doc says (it waits for its
// ctx): once a MultiLock or RedLock Lock gave up when the wait ran out and
// returned ErrNoQuorum, and a FairLock Lock queued in Redis with the wait as
// its queue timeout instead of WithFairLockWaitTimeout.
func TestLockIgnoresWithWait(t *testing.T) {
	type pair struct{ holder, waiter lockactor.Locker }
	tests := []struct {
		name string
		make func(t *testing.T, name string) (pair, *redistest.Server)
	}{
		{"Lock", func(t *testing.T, name string) (pair, *redistest.Server) {
			srv := redistest.Start(t)
			return pair{newClient(t, srv.Client(t)).Lock(name), newClient(t, srv.Client(t)).Lock(name)}, srv
		}},
		{"FencedLock", func(t *testing.T, name string) (pair, *redistest.Server) {
			srv := redistest.Start(t)
			return pair{newClient(t, srv.Client(t)).FencedLock(name), newClient(t, srv.Client(t)).FencedLock(name)}, srv
		}},
		{"FairLock", func(t *testing.T, name string) (pair, *redistest.Server) {
			srv := redistest.Start(t)
			return pair{newClient(t, srv.Client(t)).FairLock(name), newClient(t, srv.Client(t)).FairLock(name)}, srv
		}},
		{"WriteLock", func(t *testing.T, name string) (pair, *redistest.Server) {
			srv := redistest.Start(t)
			return pair{newClient(t, srv.Client(t)).ReadWriteLock(name).WriteLock(), newClient(t, srv.Client(t)).ReadWriteLock(name).WriteLock()}, srv
		}},
		{"MultiLock", func(t *testing.T, name string) (pair, *redistest.Server) {
			srv := redistest.Start(t)
			multi := func() lockactor.Locker {
				c := newClient(t, srv.Client(t))
				return lockactor.NewMultiLock(c.Lock(name+"-1"), c.Lock(name+"-2"))
			}
			return pair{multi(), multi()}, srv
		}},
		{"RedLock", func(t *testing.T, name string) (pair, *redistest.Server) {
			_, clients := redlockNodes(t, 3)
			holder, _ := redLockOn(clients, name)
			waiter, _ := redLockOn(clients, name)
			return pair{holder, waiter}, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxFor(t, 20*time.Second)
			name := "lock-ignores-wait-" + tt.name
			p, srv := tt.make(t, name)
			if err := p.holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			defer cancel()
			start := time.Now()
			done := lockAsyncWith(wctx, p.waiter, lockactor.WithWait(100*time.Millisecond))
			time.Sleep(500 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("Lock with WithWait(100ms) returned after %v: %v; want it waiting for its ctx", time.Since(start), err)
			default:
			}
			if tt.name == "FairLock" {
				// Queued with the Client's queue timeout (5 min), not 100 ms.
				rdb := srv.Client(t)
				q := fairQueue(t, rdb, name)
				if len(q) != 1 {
					t.Fatalf("fair queue = %v", q)
				}
				at := rdb.ZScore(ctx, redisio.FairTimeouts(name), q[0]).Val()
				if left := time.Until(time.UnixMilli(int64(at))); left < time.Minute {
					t.Fatalf("the waiter's queue deadline is %v away; want the holder's TTL plus the 5 min queue timeout", left)
				}
			}
			if err := p.holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := waitErr(t, done, time.Second, "waiter after the unlock"); err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("the waiter timed out instead of taking the released lock: %v", err)
				}
				t.Fatalf("the waiter's Lock after the unlock: %v", err)
			}
			if err := p.waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// lockAsyncWith runs l.Lock(ctx, opts...) in a goroutine and reports when it
// returned.
func lockAsyncWith(ctx context.Context, l lockactor.Locker, opts ...lockactor.LockOption) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx, opts...) }()
	return done
}
