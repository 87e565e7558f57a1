package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// The Java peer's side of the fair lock, read-write lock and semaphore,
// written from Redisson's key layout (see javaPeer in peer_lock_test.go).

const peerFairLock = `
local now = tonumber(ARGV[4])
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  if tonumber(redis.call('zscore', KEYS[3], first)) <= now then
    redis.call('zrem', KEYS[3], first) redis.call('lpop', KEYS[2])
  else break end
end
if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2]) redis.call('zrem', KEYS[3], ARGV[2])
  local ks = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #ks do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), ks[i]) end
  redis.call('hset', KEYS[1], ARGV[2], 1) redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local t = redis.call('zscore', KEYS[3], ARGV[2])
if t ~= false then return t - tonumber(ARGV[3]) - now end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] then ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now
else ttl = redis.call('pttl', KEYS[1]) end
if redis.call('zadd', KEYS[3], now + ttl + tonumber(ARGV[3]), ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]) end
return ttl`

const peerFairUnlock = `
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then return 0 end
redis.call('del', KEYS[1])
local next = redis.call('lindex', KEYS[2], 0)
if next ~= false then redis.call('publish', KEYS[3] .. ':' .. next, ARGV[1]) end
return 1`

const peerReadLock = `
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or mode == 'read' then
  redis.call('hset', KEYS[1], 'mode', 'read')
  local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. ind, 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])`

// peerReadUnlock is Redisson's read unlock: it keeps the lock alive while any
// reader's rwlock_timeout key is, and only then deletes and publishes.
const peerReadUnlock = `
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then return nil end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (counter + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local maxRemain = -3
  for _, key in ipairs(redis.call('hkeys', KEYS[1])) do
    local c = tonumber(redis.call('hget', KEYS[1], key))
    if type(c) == 'number' then
      for i = c, 1, -1 do
        maxRemain = math.max(redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i), maxRemain)
      end
    end
  end
  if maxRemain > 0 then redis.call('pexpire', KEYS[1], maxRemain) return 0 end
  if mode == 'write' then return 0 end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1`

func (p *javaPeer) fairKeys(name string) []string {
	return []string{name, "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}"}
}

func (p *javaPeer) fairLock(ctx context.Context, name string) (bool, error) {
	err := p.rdb.Eval(ctx, peerFairLock, p.fairKeys(name), 30000, p.owner, 300000, time.Now().UnixMilli()).Err()
	if errors.Is(err, redis.Nil) {
		return true, nil
	}
	return false, err
}

func (p *javaPeer) fairUnlock(ctx context.Context, name string) error {
	keys := []string{name, "redisson_lock_queue:{" + name + "}", "redisson_lock__channel:{" + name + "}"}
	return p.rdb.Eval(ctx, peerFairUnlock, keys, "0", p.owner).Err()
}

func (p *javaPeer) readLock(ctx context.Context, name string) (bool, error) {
	keys := []string{name, "{" + name + "}:" + p.owner + ":rwlock_timeout"}
	err := p.rdb.Eval(ctx, peerReadLock, keys, 30000, p.owner).Err()
	if errors.Is(err, redis.Nil) {
		return true, nil
	}
	return false, err
}

func (p *javaPeer) readUnlock(ctx context.Context, name string) (int64, error) {
	keys := []string{name, "redisson_rwlock:{" + name + "}", "{" + name + "}:" + p.owner + ":rwlock_timeout", "{" + name + "}"}
	return p.rdb.Eval(ctx, peerReadUnlock, keys, "0", p.owner).Int64()
}

func TestRedissonPeerFairLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	peer := newPeer(rdb)
	ours := newClient(t, srv.Client(t)).FairLock("pfair")
	ctx := ctxFor(t, 20*time.Second)

	// The peer holds; we queue in its queue and are woken on our own channel.
	if ok, err := peer.fairLock(ctx, "pfair"); !ok || err != nil {
		t.Fatalf("peer fair lock = %v, %v", ok, err)
	}
	d := wakeAfter(t, func() error { return ours.Lock(ctx) }, func() error {
		if n := rdb.LLen(ctx, "redisson_lock_queue:{pfair}").Val(); n != 1 {
			return fmt.Errorf("peer-visible queue holds %d waiters, want ours", n)
		}
		return peer.fairUnlock(ctx, "pfair")
	})
	if d > 300*time.Millisecond {
		t.Fatalf("woken %v after the peer's unlock", d)
	}
	// Now we hold: the peer queues behind us and our unlock wakes it.
	if ok, _ := peer.fairLock(ctx, "pfair"); ok {
		t.Fatal("peer acquired our fair lock")
	}
	sub := listen(ctx, t, rdb, "redisson_lock__channel:{pfair}:"+peer.owner)
	if err := ours.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.ReceiveMessage(ctxFor(t, 2*time.Second)); err != nil || msg.Payload != "0" {
		t.Fatalf("peer's own channel got %v, %v", msg, err)
	}
	if ok, err := peer.fairLock(ctx, "pfair"); !ok || err != nil {
		t.Fatalf("peer at the head after our unlock = %v, %v", ok, err)
	}
}

func TestRedissonPeerReadWriteLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	peer := newPeer(rdb)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 20*time.Second)

	// A peer reader and ours share; the peer's unlock keeps our hold alive.
	if ok, err := peer.readLock(ctx, "prw"); !ok || err != nil {
		t.Fatalf("peer read = %v, %v", ok, err)
	}
	ourReader := c.ReadWriteLock("prw").ReadLock()
	if ok, err := ourReader.TryLock(ctx); !ok || err != nil {
		t.Fatalf("our read beside the peer's = %v, %v", ok, err)
	}
	if n, err := peer.readUnlock(ctx, "prw"); n != 0 || err != nil {
		t.Fatalf("peer read unlock = %d, %v; want 0 (lock kept for our reader)", n, err)
	}
	if held, _ := ourReader.IsHeldByMe(ctx); !held {
		t.Fatal("the peer reader's unlock dropped our read hold")
	}
	if d := rdb.PTTL(ctx, "prw").Val(); d <= 0 {
		t.Fatalf("lock TTL after the peer's unlock = %v", d)
	}
	if err := ourReader.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// The peer reads; our writer waits and is woken by the peer's "0".
	if ok, _ := peer.readLock(ctx, "prw"); !ok {
		t.Fatal("peer read refused")
	}
	writer := c.ReadWriteLock("prw").WriteLock()
	d := wakeAfter(t, func() error { return writer.Lock(ctx) }, func() error {
		if n, err := peer.readUnlock(ctx, "prw"); n != 1 || err != nil {
			return fmt.Errorf("peer's last read unlock = %d, %v", n, err)
		}
		return nil
	})
	if d > 300*time.Millisecond {
		t.Fatalf("writer woken %v after the peer's unlock", d)
	}
	// The peer sees our write hold.
	if ok, _ := peer.readLock(ctx, "prw"); ok {
		t.Fatal("peer read during our write hold")
	}
}

func TestRedissonPeerSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	sem := newClient(t, srv.Client(t)).Semaphore("psem")
	ctx := ctxFor(t, 20*time.Second)
	if ok, err := sem.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if v := rdb.Get(ctx, "psem").Val(); v != "2" {
		t.Fatalf("peer reads %q permits, want 2", v)
	}
	if err := sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	d := wakeAfter(t, func() error { return sem.Acquire(ctx, 1) }, func() error {
		// The peer releases as Redisson does: INCRBY, then publish the count.
		n := rdb.IncrBy(ctx, "psem", 1).Val()
		return rdb.Publish(ctx, "redisson_sc:{psem}", strconv.FormatInt(n, 10)).Err()
	})
	if d > 300*time.Millisecond {
		t.Fatalf("woken %v after the peer's release", d)
	}
	if v := rdb.Get(ctx, "psem").Val(); v != "0" {
		t.Fatalf("count after our acquire = %q, want 0", v)
	}
}

func TestRedissonPeerFencedLayout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	peer := newPeer(rdb)
	l := newClient(t, srv.Client(t)).FencedLock("pfenced")
	ctx := ctxFor(t, 20*time.Second)
	// Tokens a Java client issued, above the clock (which our grants also
	// read): ours continues the shared counter.
	rdb.Set(ctx, "redisson_lock_token:{pfenced}", aheadOfClock+41, 0)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Token() != aheadOfClock+42 {
		t.Fatalf("token = %d, want %d (continuing the shared counter)", l.Token(), aheadOfClock+42)
	}
	if ok, _, _ := peer.tryLock(ctx, "pfenced"); ok {
		t.Fatal("peer got a fenced lock we hold")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.TTL(ctx, "redisson_lock_token:{pfenced}").Val(); ttl != -1 {
		t.Fatalf("token key TTL = %v, want none", ttl)
	}
}

// An Unlock of a fair lock whose hold had expired tells the queue's head,
// as Redisson's unlock does: a Java waiter at the head that sleeps until
// told (or until its own estimate) learns that the lock is free now. The
// Unlock itself reports ErrNotHeld.
func TestRedissonPeerFairHeadToldWhenOurHoldExpired(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	peer := newPeer(rdb)
	ours := newClient(t, srv.Client(t)).FairLock("pfair-expired")
	ctx := ctxFor(t, 20*time.Second)

	if err := ours.Lock(ctx, lockactor.WithLease(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := peer.fairLock(ctx, "pfair-expired"); ok {
		t.Fatal("peer acquired our fair lock")
	}
	sub := listen(ctx, t, rdb, "redisson_lock__channel:{pfair-expired}:"+peer.owner)
	deadline := time.Now().Add(2 * time.Second)
	for rdb.Exists(ctx, "pfair-expired").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("our 200ms lease never ran out")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ours.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock after the lease ran out = %v, want ErrNotHeld", err)
	}
	if msg, err := sub.ReceiveMessage(ctxFor(t, 2*time.Second)); err != nil || msg.Payload != "0" {
		t.Fatalf("peer at the head heard %v, %v; want the unlock message 0", msg, err)
	}
}
