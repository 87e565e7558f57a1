package lockactor_test

// How the LockOptions apply to each kind of lock.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

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
