package lockactor_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

// The Java peer's side of RPermitExpirableSemaphore, written from
// Redisson's layout: the count under the name, the held permits' raw ids
// in {name}:timeout scored by deadlines in ms of the caller's clock, and
// the count published on redisson_sc:{name}. Each script first gives back
// expired permits (the acquire at most as many as it wants).

// peerPermitAcquire takes ARGV[1] permits under the id ARGV[5] until
// ARGV[2]; ARGV[3] is the caller's now, ARGV[4] the publish command.
// Replies "OK", or ":<earliest deadline>" when none is free, or nil.
const peerPermitAcquire = `
local gone = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #gone > 0 then
  redis.call('zrem', KEYS[2], unpack(gone))
  local left = redis.call('incrby', KEYS[1], #gone)
  if left > 0 then redis.call(ARGV[4], KEYS[3], left) end
end
local have = redis.call('get', KEYS[1])
if have and tonumber(have) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  redis.call('zadd', KEYS[2], ARGV[2], ARGV[5])
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] then return ':' .. first[2] end
return nil`

// peerPermitRelease gives back the permit ARGV[1] (KEYS in Redisson's
// order: count, channel, timeouts); ARGV[2] is now, ARGV[3] the publish
// command. 1 given back; 0 not held, or found expired (given back then).
const peerPermitRelease = `
local deadline = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then return 0 end
redis.call(ARGV[3], KEYS[2], redis.call('incrby', KEYS[1], 1))
if tonumber(deadline) <= tonumber(ARGV[2]) then return 0 end
return 1`

// peerPermitUpdate gives the held permit ARGV[1] the deadline ARGV[2];
// ARGV[3] is now, ARGV[4] the publish command. 1 done, 0 not held.
const peerPermitUpdate = `
local gone = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3])
if #gone > 0 then
  redis.call('zrem', KEYS[2], unpack(gone))
  local left = redis.call('incrby', KEYS[1], #gone)
  if left > 0 then redis.call(ARGV[4], KEYS[3], left) end
end
if redis.call('zscore', KEYS[2], ARGV[1]) == false then return 0 end
redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
return 1`

// permitPeer is a Redisson client's RPermitExpirableSemaphore.
type permitPeer struct {
	rdb  *redis.Client
	name string
}

func (p permitPeer) keys() []string {
	return []string{p.name, redisio.PermitTimeouts(p.name), redisio.SemaphoreChannel(p.name)}
}

// tryAcquire takes one permit for lease if one is free: its id, or ("",
// the refusal's reply).
func (p permitPeer) tryAcquire(ctx context.Context, lease time.Duration) (id, refusal string, err error) {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	now := time.Now().UnixMilli()
	v, err := p.rdb.Eval(ctx, peerPermitAcquire, p.keys(), 1, now+lease.Milliseconds(), now, "publish", string(raw[:])).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return "", "nil", nil
	case err != nil:
		return "", "", err
	case v == "OK":
		return hex.EncodeToString(raw[:]), "", nil
	}
	return "", v, nil
}

func (p permitPeer) release(ctx context.Context, id string) (int64, error) {
	raw, _ := hex.DecodeString(id)
	keys := []string{p.name, redisio.SemaphoreChannel(p.name), redisio.PermitTimeouts(p.name)}
	return p.rdb.Eval(ctx, peerPermitRelease, keys, string(raw), time.Now().UnixMilli(), "publish").Int64()
}

func (p permitPeer) updateLease(ctx context.Context, id string, lease time.Duration) (int64, error) {
	raw, _ := hex.DecodeString(id)
	now := time.Now().UnixMilli()
	return p.rdb.Eval(ctx, peerPermitUpdate, p.keys(), string(raw), now+lease.Milliseconds(), now, "publish").Int64()
}

// Our holders and the peer's share 3 permits: never more than 3 in use.
func TestRedissonPeerPermitSemaphoreShared(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	const name, set, rounds = "ppermit-shared", 3, 15
	peer := permitPeer{srv.Client(t), name}
	ours := setPermits(t, srv.Client(t), name, set)
	var mu sync.Mutex
	var log []section
	use := func(who, id string) {
		start := time.Now()
		time.Sleep(time.Millisecond) // the work
		mu.Lock()
		log = append(log, section{who + " " + id, start, time.Now()})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() { // ours
			for range rounds {
				id, err := ours.Acquire(ctx, 30*time.Second)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				use("ours", id)
				if err := ours.Release(ctx, id); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
		wg.Go(func() { // the peer's: it polls, as a Redisson tryAcquire loop would
			for r := 0; r < rounds; {
				id, refusal, err := peer.tryAcquire(ctx, 30*time.Second)
				if err != nil {
					t.Errorf("peer %d acquire: %v", g, err)
					return
				}
				if id == "" {
					if !strings.HasPrefix(refusal, ":") {
						t.Errorf("peer refused with %q while permits are out, want \":<deadline>\"", refusal)
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				r++
				use("peer", id)
				if n, err := peer.release(ctx, id); n != 1 || err != nil {
					t.Errorf("peer release = %d, %v", n, err)
				}
			}
		})
	}
	wg.Wait()
	if len(log) != 2*3*rounds {
		t.Fatalf("%d uses, want %d", len(log), 2*3*rounds)
	}
	most, at := mostHeld(log)
	if most > set {
		t.Fatalf("%d permits in use at once at %s, of %d", most, at.Format("15:04:05.000000"), set)
	}
	mixed := 0 // our uses that overlap one of the peer's
	for _, a := range log {
		for _, b := range log {
			if strings.HasPrefix(a.owner, "ours") && strings.HasPrefix(b.owner, "peer") && a.start.Before(b.end) && b.start.Before(a.end) {
				mixed++
				break
			}
		}
	}
	t.Logf("%d uses, at most %d at once, %d of ours beside one of the peer's", len(log), most, mixed)
	if mixed == 0 {
		t.Fatal("no use of ours overlapped one of the peer's: the two sides never shared the permits")
	}
	if count, ids := permitState(t, peer.rdb, name); count != set || len(ids) != 0 {
		t.Fatalf("at the end: count %d, held %v; want %d and none", count, ids, set)
	}
}

// A release on either side wakes a waiter on the other; a lease set on
// either side holds for both.
func TestRedissonPeerPermitSemaphoreWakes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "ppermit-wake"
	peer := permitPeer{srv.Client(t), name}
	ours := setPermits(t, srv.Client(t), name, 2)

	// The peer holds both permits (leases of 30 s: only a message can wake
	// us sooner than the once-a-second re-check).
	var peerIDs []string
	for range 2 {
		id, refusal, err := peer.tryAcquire(ctx, 30*time.Second)
		if id == "" || err != nil {
			t.Fatalf("peer acquire = %q, %v", refusal, err)
		}
		peerIDs = append(peerIDs, id)
	}
	var ourID string
	d := wakeAfter(t, func() (err error) { ourID, err = ours.Acquire(ctx, time.Minute); return err }, func() error {
		if n, err := peer.release(ctx, peerIDs[0]); n != 1 || err != nil {
			return fmt.Errorf("peer release = %d, %v", n, err)
		}
		return nil
	})
	if d > 500*time.Millisecond {
		t.Fatalf("our Acquire woke %v after the peer's release (want its message, not the re-check)", d)
	}

	// Both out again (ours and the peer's second): the peer, refused,
	// waits on the channel as Redisson's subscriber does; our Release
	// publishes the count it hears.
	sub := listen(ctx, t, peer.rdb, redisio.SemaphoreChannel(name))
	id, refusal, err := peer.tryAcquire(ctx, 30*time.Second)
	if id != "" || err != nil {
		t.Fatalf("peer acquire with both permits out = %q, %v", id, err)
	}
	earliest, perr := strconv.ParseInt(strings.TrimPrefix(refusal, ":"), 10, 64)
	if !strings.HasPrefix(refusal, ":") || perr != nil || earliest < time.Now().UnixMilli() {
		t.Fatalf("peer's refusal %q, want \":<earliest deadline>\" in the future", refusal)
	}
	if err := ours.Release(ctx, ourID); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sub.Channel():
		if m.Payload != "1" {
			t.Fatalf("peer heard %q after our release, want the count, 1", m.Payload)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the peer's subscriber never heard our release")
	}
	if id, refusal, err = peer.tryAcquire(ctx, 30*time.Second); id == "" || err != nil {
		t.Fatalf("peer acquire after our release = %q, %v", refusal, err)
	}
	peerIDs = append(peerIDs[1:], id)

	// Leases across: the peer extends a short permit of ours, we extend
	// and release one of the peer's.
	for _, pid := range peerIDs {
		if n, err := peer.release(ctx, pid); n != 1 || err != nil {
			t.Fatalf("peer release = %d, %v", n, err)
		}
	}
	short, err := ours.Acquire(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := peer.updateLease(ctx, short, 30*time.Second); n != 1 || err != nil {
		t.Fatalf("peer update of our permit's lease = %d, %v", n, err)
	}
	time.Sleep(600 * time.Millisecond) // past our lease
	if n, _ := ours.AvailablePermits(ctx); n != 1 {
		t.Fatalf("AvailablePermits = %d: the lease the peer extended ran out at ours", n)
	}
	if err := ours.Release(ctx, short); err != nil {
		t.Fatalf("Release of our permit the peer extended = %v", err)
	}
	theirs, _, err := peer.tryAcquire(ctx, 300*time.Millisecond)
	if theirs == "" || err != nil {
		t.Fatalf("peer acquire = %q, %v", theirs, err)
	}
	if err := ours.UpdateLease(ctx, theirs, 30*time.Second); err != nil {
		t.Fatalf("our UpdateLease of the peer's permit = %v", err)
	}
	time.Sleep(600 * time.Millisecond)
	if n, err := peer.release(ctx, theirs); n != 1 || err != nil {
		t.Fatalf("peer release of its permit we extended = %d, %v; want 1 (held, not expired)", n, err)
	}
	if err := ours.Release(ctx, theirs); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("our Release of the peer's released permit = %v, want ErrNotHeld", err)
	}
}

// AddPermits of a permit semaphore publishes as Redisson's does: the number
// added, and only when it is positive (a Java waiter releases as many
// local waiters as the message says, and throws on a negative number).
func TestRedissonPeerPermitAddPermitsMessage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	const name = "ppermit-add"
	ours := setPermits(t, srv.Client(t), name, 2)
	sub := listen(ctx, t, srv.Client(t), redisio.SemaphoreChannel(name))
	tests := []struct {
		n    int
		want string // "" for no message
	}{
		{-1, ""},
		{-3, ""},
		{3, "3"},
		{1, "1"},
	}
	for _, tc := range tests {
		if err := ours.AddPermits(ctx, tc.n); err != nil {
			t.Fatalf("AddPermits(%d) = %v", tc.n, err)
		}
		select {
		case m := <-sub.Channel():
			if m.Payload != tc.want {
				t.Fatalf("AddPermits(%d) published %q, want %q", tc.n, m.Payload, tc.want)
			}
		case <-time.After(300 * time.Millisecond):
			if tc.want != "" {
				t.Fatalf("AddPermits(%d) published nothing, want %q", tc.n, tc.want)
			}
		}
	}
	if n, err := ours.AvailablePermits(ctx); n != 2 || err != nil {
		t.Fatalf("AvailablePermits = %d, %v; want 2 (2 -1 -3 +3 +1)", n, err)
	}
}
