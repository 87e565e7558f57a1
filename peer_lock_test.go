package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// javaPeer stands in for a Java Redisson client: it speaks Redisson's RLock
// layout through raw EVAL and SUBSCRIBE, with no lockactor code.
// Its scripts are written from the protocol, not shared with package scripts,
// so a drift in ours shows up here.
type javaPeer struct {
	rdb   *redis.Client
	owner string // "<uuid>:<thread id>"
}

const peerLock = `
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`

const peerUnlock = `
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local c = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if c > 0 then redis.call('pexpire', KEYS[1], ARGV[2]) return 0 end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1`

func newPeer(rdb *redis.Client) *javaPeer {
	return &javaPeer{rdb: rdb, owner: uuid.NewString() + ":1"}
}

// tryLock returns (true, 0) when granted, else (false, holder's PTTL).
func (p *javaPeer) tryLock(ctx context.Context, name string) (bool, time.Duration, error) {
	ttl, err := p.rdb.Eval(ctx, peerLock, []string{name}, 30000, p.owner).Int64()
	if errors.Is(err, redis.Nil) {
		return true, 0, nil
	}
	return false, time.Duration(ttl) * time.Millisecond, err
}

func (p *javaPeer) unlock(ctx context.Context, name string) (int64, error) {
	return p.rdb.Eval(ctx, peerUnlock, []string{name, "redisson_lock__channel:{" + name + "}"}, "0", 30000, p.owner).Int64()
}

func TestRedissonPeerExcludesAndWakesUs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	peer := newPeer(srv.Client(t))
	ours := newClient(t, srv.Client(t)).Lock("interop")
	ctx := ctxFor(t, 20*time.Second)

	if ok, _, err := peer.tryLock(ctx, "interop"); !ok || err != nil {
		t.Fatalf("peer tryLock = %v, %v", ok, err)
	}
	if ok, err := ours.TryLock(ctx); ok || err != nil {
		t.Fatalf("our TryLock while the peer holds = %v, %v; want false", ok, err)
	}
	woke := wakeAfter(t, func() error { return ours.Lock(ctx) }, func() error {
		if n, err := peer.unlock(ctx, "interop"); n != 1 || err != nil {
			return fmt.Errorf("peer unlock = %d, %v", n, err)
		}
		return nil
	})
	if woke > 300*time.Millisecond {
		t.Fatalf("woken %v after the peer's unlock (peer lease 30s): not by its message", woke)
	}
}

func TestRedissonPeerSeesAndAwaitsOurHold(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	peer := newPeer(rdb)
	ours := newClient(t, srv.Client(t)).Lock("interop2")
	ctx := ctxFor(t, 20*time.Second)

	if err := ours.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ok, ttl, err := peer.tryLock(ctx, "interop2")
	if ok || err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("peer tryLock during our hold = %v, %v, %v; want refused with our PTTL", ok, ttl, err)
	}
	// A peer unlock of a lock it does not own changes nothing.
	if _, err := peer.unlock(ctx, "interop2"); !errors.Is(err, redis.Nil) {
		t.Fatalf("peer unlock of our lock = %v, want nil reply", err)
	}
	sub := listen(ctx, t, rdb, "redisson_lock__channel:{interop2}")
	if err := ours.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctxFor(t, 2*time.Second))
	if err != nil || msg.Payload != "0" {
		t.Fatalf("peer's channel got %v, %v; want payload 0", msg, err)
	}
	if ok, _, err := peer.tryLock(ctx, "interop2"); !ok || err != nil {
		t.Fatalf("peer tryLock after our unlock = %v, %v", ok, err)
	}
	// And our lock waits for the peer's hold.
	if ok, err := ours.TryLock(ctx, lockactor.WithWait(100*time.Millisecond)); ok || err != nil {
		t.Fatalf("our TryLock during the peer's hold = %v, %v", ok, err)
	}
}

// listen subscribes rdb to channel and returns once Redis confirmed it, so
// that nothing published from then on is missed; the subscription closes
// at the test's end.
func listen(ctx context.Context, t *testing.T, rdb *redis.Client, channel string) *redis.PubSub {
	t.Helper()
	sub := rdb.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("subscribe %s: %v", channel, err)
	}
	return sub
}
