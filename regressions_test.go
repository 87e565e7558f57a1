package lockactor_test

// Regression tests for findings of a review of the lock actors: each shows a
// path that once dropped a waiter, kept a coordinator alive, lost wake-ups,
// or spent one script per message.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

// A waiter whose grant arrives after it gave up must not take a queue slot
// with it: the grant goes back and the waiters behind are served, in order,
// each answered. (Once, the nested release this set off popped a waiter
// without answering it, or panicked on an empty queue and answered the
// release twice, blocking the actor.)
func TestGrantToWaiterThatLeftKeepsQueueServed(t *testing.T) {
	srv := redistest.Start(t)
	rdb, hook := hooked(t, srv)
	c := newClient(t, rdb)
	ctx := ctxFor(t, 30*time.Second)
	holder := c.FencedLock("left") // fenced: no hand-off, grants go through the queue
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	w1ctx, cancelW1 := context.WithCancel(ctx)
	w1 := c.FencedLock("left")
	w1Done := lockAsync(w1ctx, w1)
	time.Sleep(100 * time.Millisecond)
	w2 := c.FencedLock("left")
	w2Done := lockAsync(ctx, w2)
	time.Sleep(50 * time.Millisecond)
	w3 := c.FencedLock("left")
	w3Done := lockAsync(ctx, w3)
	time.Sleep(100 * time.Millisecond)

	hook.add(&faultRule{match: evalOf(scripts.Latched.FencedLock.Hash()), times: 1, delay: 150 * time.Millisecond})
	go func() { time.Sleep(50 * time.Millisecond); cancelW1() }() // during W1's grant
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, w1Done, 2*time.Second, "W1"); err == nil {
		if err := w1.Unlock(ctx); err != nil { // it won the race: fine, let go
			t.Fatal(err)
		}
	} else if !errors.Is(err, context.Canceled) {
		t.Fatalf("W1 = %v", err)
	}
	if err := waitErr(t, w2Done, 3*time.Second, "W2"); err != nil {
		t.Fatal(err)
	}
	uctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := w2.Unlock(uctx); err != nil {
		t.Fatalf("W2's Unlock: %v (the actor is blocked?)", err)
	}
	if err := waitErr(t, w3Done, 3*time.Second, "W3"); err != nil {
		t.Fatal(err)
	}
	if n, _ := w1.HoldCount(ctx); n != 0 {
		t.Fatal("W1 holds the lock after giving up")
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

// A subscription connection that stops answering (half-open TCP) is noticed
// by its missing PONG and replaced; the waiter on it wakes then, long before
// the holder's lease would have woken it.
func TestHalfOpenSubscriptionIsReplaced(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	ctx := ctxFor(t, 30*time.Second)
	holder := newClient(t, srv.Client(t)).Lock("half-open") // 30 s lease
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	const health = 300 * time.Millisecond
	waiter := newClient(t, proxy.Client(t), lockactor.WithPubSubHealthCheck(health)).Lock("half-open")
	done := lockAsync(ctx, waiter)
	admin := srv.Client(t)
	within(t, 2*time.Second, "waiter subscribed", func() bool {
		return admin.PubSubNumSub(ctx, redisio.LockChannel("half-open")).Val()[redisio.LockChannel("half-open")] == 1
	})
	if n := proxy.Freeze(func(ci redistest.ConnInfo) bool { return ci.Subscriber }); n != 1 {
		t.Fatalf("froze %d subscriber connections, want 1", n)
	}
	if err := holder.Unlock(ctx); err != nil { // its message is lost on the frozen connection
		t.Fatal(err)
	}
	released := time.Now()
	if err := waitErr(t, done, 10*time.Second, "waiter behind a half-open subscription"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(released); d > 4*health+time.Second {
		t.Fatalf("waiter woke %v after the release; the health check should replace the connection within %v", d, 2*health)
	} else {
		t.Logf("waiter woke %v after the release", d)
	}
}

// A burst of release messages costs one script per attempt time, not one per
// message: messages that arrive while an attempt runs coalesce into one wake.
func TestMessageBurstCoalesces(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	holder := newClient(t, srv.Client(t)).Lock("burst") // 30 s lease
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb, hook := hooked(t, srv)
	waiter := newClient(t, rdb).Lock("burst")
	done := lockAsync(ctx, waiter)
	admin := srv.Client(t)
	within(t, 2*time.Second, "waiter subscribed", func() bool {
		return admin.PubSubNumSub(ctx, redisio.LockChannel("burst")).Val()[redisio.LockChannel("burst")] == 1
	})
	time.Sleep(50 * time.Millisecond)
	attempts := hook.add(&faultRule{match: evalOf(scripts.Latched.Lock.Hash()), times: 0})
	const burst = 1000
	pipe := admin.Pipeline()
	for range burst {
		pipe.Publish(ctx, redisio.LockChannel("burst"), "0")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	n := hook.count(attempts)
	t.Logf("%d release messages, %d acquire attempts", burst, n)
	if n > burst/4 {
		t.Fatalf("%d attempts for %d messages: wake-ups do not coalesce", n, burst)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, done, 2*time.Second, "waiter after the real release"); err != nil {
		t.Fatal(err)
	}
}
