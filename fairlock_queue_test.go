package lockactor_test

// The fair lock's queue in Redis (redisson_lock_queue and its deadlines in
// redisson_lock_timeout): what QueueLength and QueuePosition read from it,
// and how waiters are queued, woken and taken out when entries were left by
// crashed clients, lack a deadline, or belong to waiters the actor forgot.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

// TestFairQueueInspection: QueueLength counts the owners queued in Redis
// from every Client, QueuePosition is each one's place; other kinds report 0.
func TestFairQueueInspection(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	holder := newClient(t, srv.Client(t)).FairLock("inspect")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var waiters []*lockactor.Lock
	done := make(chan error, 2)
	for i := range 2 {
		w := newClient(t, srv.Client(t)).FairLock("inspect")
		waiters = append(waiters, w)
		go func() {
			if err := w.Lock(ctx); err != nil {
				done <- err
				return
			}
			done <- w.Unlock(ctx)
		}()
		within(t, 5*time.Second, "waiter queued", func() bool {
			p, err := w.QueuePosition(ctx)
			return err == nil && p == i+1
		})
	}
	if n, err := holder.QueueLength(ctx); n != 2 || err != nil {
		t.Fatalf("QueueLength = %d, %v; want 2", n, err)
	}
	if p, err := holder.QueuePosition(ctx); p != 0 || err != nil {
		t.Fatalf("the holder's QueuePosition = %d, %v; want 0", p, err)
	}
	plain := newClient(t, srv.Client(t)).Lock("inspect-plain")
	if n, err := plain.QueueLength(ctx); n != 0 || err != nil {
		t.Fatalf("a plain lock's QueueLength = %d, %v; want 0", n, err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n, err := holder.QueueLength(ctx); n != 0 || err != nil {
		t.Fatalf("QueueLength after everyone ran = %d, %v; want 0", n, err)
	}
}

// A fair queue whose head was left by a crashed client (its deadline in
// redisson_lock_timeout has passed) must not swallow the wake-up of a force
// unlock or of a waiter that leaves: once fair_force_unlock and fair_cancel
// told the dead head, and the live waiter behind slept until its own retry
// (the holder's 30 s TTL plus the queue wait). The crashed client's hold and
// queue entry are written directly, as the key layout is the protocol.
func TestFairWakeSkipsStaleHead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		deadAt   string // "head", or "behind" the waiter that leaves
		force    bool   // free the lock by ForceUnlock; else by expiry, then a waiter leaves
		wantQuit bool   // the waiter expected to get the lock is the one that could leave
	}{
		{name: "force unlock", deadAt: "head", force: true, wantQuit: true},
		{name: "cancel behind dead head", deadAt: "head"},
		{name: "cancel ahead of dead entry", deadAt: "behind"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			ctx := ctxFor(t, 20*time.Second)
			name := "fair-stale-" + string(rune('a'+i))
			queue, deadlines := redisio.FairQueue(name), redisio.FairTimeouts(name)
			// A crashed client's hold: the waiters estimate its 30 s TTL.
			if err := rdb.HSet(ctx, name, "crashed-holder:1", 1).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.PExpire(ctx, name, 30*time.Second)

			quitCtx, quit := context.WithCancel(ctx)
			defer quit()
			quitter := newClient(t, srv.Client(t)).FairLock(name)
			quitDone := lockAsync(quitCtx, quitter)
			within(t, 2*time.Second, "first waiter queued", func() bool { return queueLen(t, srv, name) == 1 })
			quitOwner := fairQueue(t, rdb, name)[0]
			next := newClient(t, srv.Client(t)).FairLock(name)
			nextDone := lockAsync(ctx, next)
			within(t, 2*time.Second, "second waiter queued", func() bool { return queueLen(t, srv, name) == 2 })
			time.Sleep(300 * time.Millisecond) // subscribed, and its attempt on subscribing made

			// The crashed client's queue entry, its deadline long past.
			const dead = "crashed-waiter:1"
			if err := rdb.ZAdd(ctx, deadlines, redis.Z{Score: float64(time.Now().Add(-time.Minute).UnixMilli()), Member: dead}).Err(); err != nil {
				t.Fatal(err)
			}
			if tt.deadAt == "head" {
				rdb.LPush(ctx, queue, dead)
			} else {
				rdb.LInsertAfter(ctx, queue, quitOwner, dead)
			}

			start := time.Now()
			var woken <-chan error
			if tt.force {
				if ok, err := next.ForceUnlock(ctx); !ok || err != nil {
					t.Fatalf("ForceUnlock = %v, %v", ok, err)
				}
				woken = quitDone
			} else {
				rdb.Del(ctx, name) // the crashed holder's lease runs out: no message
				quit()
				if err := waitErr(t, quitDone, 2*time.Second, "leaver"); err == nil {
					t.Fatal("the leaver got the lock")
				}
				woken = nextDone
			}
			if err := waitErr(t, woken, 2*time.Second, "live waiter behind the dead entry"); err != nil {
				t.Fatal(err)
			}
			t.Logf("live waiter woken %v after the release", time.Since(start))
		})
	}
}

// A queue entry without a deadline (left by another client, or a partial
// state) at the tail of a fair queue must not make the next waiter's enqueue
// fail: fair_lock once took the tail's deadline as its base and erred on the
// missing score. The waiter must queue and get the lock once the entries
// ahead are gone.
func TestFairEnqueueBehindTailWithoutDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		acquire func(ctx context.Context, l *lockactor.Lock) error
	}{
		{"Lock", func(ctx context.Context, l *lockactor.Lock) error { return l.Lock(ctx) }},
		{"TryLock with wait", func(ctx context.Context, l *lockactor.Lock) error {
			ok, err := l.TryLock(ctx, lockactor.WithWait(5*time.Second))
			if err == nil && !ok {
				t.Error("TryLock gave up")
			}
			return err
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			ctx := ctxFor(t, 20*time.Second)
			name := "fair-scoreless-" + string(rune('a'+i))
			// A waiter about to be purged at the head, then one with no score.
			rdb.RPush(ctx, redisio.FairQueue(name), "other-head:1", "scoreless:1")
			rdb.ZAdd(ctx, redisio.FairTimeouts(name), redis.Z{Score: float64(time.Now().Add(500 * time.Millisecond).UnixMilli()), Member: "other-head:1"})

			l := newClient(t, srv.Client(t)).FairLock(name)
			start := time.Now()
			if err := tt.acquire(ctx, l); err != nil {
				t.Fatalf("acquire behind a tail without a deadline: %v", err)
			}
			t.Logf("acquired after %v", time.Since(start))
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Every path on which the actor stops waiting for a fair-lock owner takes
// that owner out of the Redis queue, or it stalls every client's queue until
// its deadline (5 minutes by default).
func TestForgottenFairWaitersAreCancelled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// forget makes the actor forget the queued waiter w (whose Lock
		// runs under cancel) and reports what its Lock must return.
		forget func(t *testing.T, c *lockactor.Client, hook *faultHook, admin *redis.Client, w *lockactor.Lock, cancel context.CancelFunc) error
	}{
		{"wake finds every call withdrawn", func(t *testing.T, c *lockactor.Client, hook *faultHook, admin *redis.Client, w *lockactor.Lock, cancel context.CancelFunc) error {
			// The actor is busy with w's retry while news for w and w's
			// withdrawal queue up behind it, news first.
			hook.add(&faultRule{match: evalOf(scripts.Latched.FairLock.Hash()), times: 1, delay: 300 * time.Millisecond})
			ch := redisio.FairChannel("fair-ghost", lockactor.OwnerOf(w))
			admin.Publish(context.Background(), ch, "0")
			time.Sleep(100 * time.Millisecond)
			admin.Publish(context.Background(), ch, "0")
			time.Sleep(20 * time.Millisecond)
			cancel()
			return context.Canceled
		}},
		{"retry fails", func(t *testing.T, c *lockactor.Client, hook *faultHook, admin *redis.Client, w *lockactor.Lock, cancel context.CancelFunc) error {
			hook.add(&faultRule{match: evalOf(scripts.Latched.FairLock.Hash()), times: 1, refuse: true})
			hook.add(&faultRule{match: evalOf(scripts.Resolve.Hash()), times: 1, refuse: true})
			admin.Publish(context.Background(), redisio.FairChannel("fair-ghost", lockactor.OwnerOf(w)), "0")
			return errInjected
		}},
		{"Close", func(t *testing.T, c *lockactor.Client, hook *faultHook, admin *redis.Client, w *lockactor.Lock, cancel context.CancelFunc) error {
			_ = c.Close()
			return lockactor.ErrClosed
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client(t)
			ctx := ctxFor(t, 20*time.Second)
			holder := newClient(t, srv.Client(t)).FairLock("fair-ghost")
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			rdb, hook := hooked(t, srv)
			c := newClient(t, rdb)
			w := c.FairLock("fair-ghost")
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := lockAsync(wctx, w)
			owner := lockactor.OwnerOf(w)
			within(t, 2*time.Second, "w queued", func() bool { return slices.Contains(fairQueue(t, admin, "fair-ghost"), owner) })
			want := tc.forget(t, c, hook, admin, w, cancel)
			if err := waitErr(t, done, 3*time.Second, "w's Lock"); !errors.Is(err, want) {
				t.Fatalf("w's Lock = %v, want %v", err, want)
			}
			within(t, 2*time.Second, "w taken out of the Redis queue", func() bool {
				return !slices.Contains(fairQueue(t, admin, "fair-ghost"), owner)
			})
		})
	}
}
