//go:build full

package lockactor_test

// Release messages and the subscription they arrive on: a half-open
// subscription connection is replaced, and a burst of messages coalesces
// into few acquire attempts.

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

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
