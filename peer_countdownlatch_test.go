package lockactor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// The Java peer's side of RCountDownLatch, written from Redisson's layout:
// the count is a plain decimal key, and messages go to
// redisson_countdownlatch__channel__{name}: "1" when a count is set, "0"
// when it reaches zero.

// peerCountDown is what Redisson's countDown runs: DECR, delete at or
// below 0, publish the zero message at exactly 0.
const peerCountDown = `
local v = redis.call('decr', KEYS[1])
if v <= 0 then redis.call('del', KEYS[1]) end
if v == 0 then redis.call('publish', KEYS[2], ARGV[1]) end`

// peerTrySetCount is what Redisson's trySetCount runs.
const peerTrySetCount = `
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2])
  redis.call('publish', KEYS[2], ARGV[1])
  return 1
end
return 0`

// Our Await callers wake on a Redisson peer's countdown; a Redisson peer
// waiting on the channel hears ours, and reads the count we set.
func TestRedissonPeerCountDownLatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxFor(t, 20*time.Second)
	l := newClient(t, srv.Client(t)).CountDownLatch("pcdl")
	keys := []string{"pcdl", "redisson_countdownlatch__channel__{pcdl}"}

	// The peer sets the count; we see it, and wait on it.
	if ok, err := rdb.Eval(ctx, peerTrySetCount, keys, "1", 2).Int(); err != nil || ok != 1 {
		t.Fatal(ok, err)
	}
	if ok, err := l.TrySetCount(ctx, 5); ok || err != nil {
		t.Fatalf("TrySetCount over the peer's count = %v, %v; want false", ok, err)
	}
	if n, err := l.Count(ctx); err != nil || n != 2 {
		t.Fatalf("Count of the peer's latch = %d, %v; want 2", n, err)
	}
	peerDown := func() error { // the script replies nil, an error to go-redis
		if err := rdb.Eval(ctx, peerCountDown, keys, "0").Err(); !errors.Is(err, redis.Nil) {
			return err
		}
		return nil
	}
	if err := peerDown(); err != nil {
		t.Fatal(err)
	}
	d := wakeAfter(t, func() error { return l.Await(ctx) }, peerDown)
	if d > 500*time.Millisecond {
		t.Fatalf("woken %v after the peer's countdown (want the zero message, not the re-check)", d)
	}

	// We set the count and count down; the peer, subscribed as Redisson
	// subscribes, hears "1" and then "0", and reads what Redisson reads.
	sub := listen(ctx, t, rdb, keys[1])
	msgs := sub.Channel()
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if v := rdb.Get(ctx, "pcdl").Val(); v != "1" {
		t.Fatalf("peer reads count %q, want 1", v)
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1", "0"} {
		select {
		case m := <-msgs:
			if m.Payload != want {
				t.Fatalf("peer heard %q, want %q", m.Payload, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("peer never heard %q", want)
		}
	}
	if n := rdb.Exists(ctx, "pcdl").Val(); n != 0 {
		t.Fatal("the key outlived its count reaching 0: a Redisson peer's trySetCount would fail")
	}
}
