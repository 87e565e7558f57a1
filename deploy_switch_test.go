//go:build full

package lockactor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

// switchLostBound is how long a hold missing on the new master may take to
// close Lost after the Failover: far more than the runtime's 250 ms master
// check, far less than the 20 s lease or the 10 s watchdog renewal period.
const switchLostBound = 10 * time.Second

// TestSwitchLosesHoldsMissingOnNewMaster proves that a Sentinel master
// switch makes every lock actor re-read its holds on the new master: a hold
// whose field is missing there (standing in for a write Sentinel lost)
// closes Lost promptly, a fixed-lease hold (20 s, which nothing else could
// close within the test) as well as a watchdog hold (timeout 30 s, renewed
// every 10 s), and its Unlock then returns ErrNotHeld. Holds present on the
// new master (the control) survive: Lost stays open and Unlock succeeds.
// Both go-redis Sentinel clients are covered: NewFailoverClient and
// NewFailoverClusterClient.
func TestSwitchLosesHoldsMissingOnNewMaster(t *testing.T) {
	for _, tt := range []struct {
		name string
		rdb  func(t *testing.T, sen *redistest.Sentinel) redis.UniversalClient
	}{
		{"failoverClient", func(t *testing.T, sen *redistest.Sentinel) redis.UniversalClient {
			return sen.FailoverClient(t, nil)
		}},
		{"failoverClusterClient", func(t *testing.T, sen *redistest.Sentinel) redis.UniversalClient {
			return sen.FailoverClusterClient(t)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // one deployment per row; they mostly wait on sentinels
			sen := redistest.StartSentinel(t)
			c := newClient(t, tt.rdb(t, sen), lockactor.WithWatchdogTimeout(30*time.Second))
			ctx := ctxFor(t, 60*time.Second)

			type hold struct {
				name  string
				lease time.Duration // 0: watchdog
				drop  bool          // deleted on the replicas: missing on the new master
				l     *lockactor.Lock
				lost  chan time.Time // when Lost closed
			}
			holds := []*hold{
				{name: "switch-lease", lease: 20 * time.Second, drop: true},
				{name: "switch-watchdog", drop: true},
				{name: "switch-kept-lease", lease: 20 * time.Second},
				{name: "switch-kept-watchdog"},
			}
			stop := make(chan struct{})
			defer close(stop) // ends the watchers below
			for _, h := range holds {
				h.l = c.Lock(h.name)
				var opts []lockactor.LockOption
				if h.lease > 0 {
					opts = append(opts, lockactor.WithLease(h.lease))
				}
				if err := h.l.Lock(ctx, opts...); err != nil {
					t.Fatalf("Lock(%s): %v", h.name, err)
				}
				h.lost = make(chan time.Time, 1)
				lost := h.l.Lost()
				go func() {
					select {
					case <-lost:
						h.lost <- time.Now()
					case <-stop:
					}
				}()
			}

			master := sen.Master().Client(t)
			for _, h := range holds {
				if typ, err := master.Type(ctx, h.name).Result(); err != nil || typ != "hash" {
					t.Fatalf("master: TYPE %s = %q, %v; want hash", h.name, typ, err)
				}
			}
			for _, r := range sen.Replicas() {
				rc := r.Client(t)
				for _, h := range holds { // replicated before anything is deleted
					within(t, 5*time.Second, "replica "+r.Addr()+" has "+h.name, func() bool {
						n, err := rc.Exists(ctx, h.name).Result()
						return err == nil && n == 1
					})
				}
				if err := rc.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
					t.Fatalf("replica %s: CONFIG SET replica-read-only no: %v", r.Addr(), err)
				}
				for _, h := range holds {
					if !h.drop {
						continue
					}
					if err := rc.Del(ctx, h.name).Err(); err != nil {
						t.Fatalf("replica %s: DEL %s: %v", r.Addr(), h.name, err)
					}
					if n, err := rc.Exists(ctx, h.name).Result(); err != nil || n != 0 {
						t.Fatalf("replica %s: EXISTS %s = %d, %v after DEL", r.Addr(), h.name, n, err)
					}
				}
			}
			for _, h := range holds {
				if n, err := master.Exists(ctx, h.name).Result(); err != nil || n != 1 {
					t.Fatalf("master: EXISTS %s = %d, %v; want 1", h.name, n, err)
				}
			}

			started := time.Now()
			sen.Failover(t)
			returned := time.Now()
			t.Logf("Failover took %v", returned.Sub(started).Round(time.Millisecond))

			for _, h := range holds {
				if !h.drop {
					continue
				}
				select {
				case at := <-h.lost:
					// Negative: Lost closed before Failover returned.
					t.Logf("%s: Lost closed at %+v relative to Failover's return (%v after it began)",
						h.name, at.Sub(returned).Round(time.Millisecond), at.Sub(started).Round(time.Millisecond))
				case <-time.After(time.Until(returned.Add(switchLostBound))):
					t.Fatalf("%s: Lost still open %v after Failover, though its hold is missing on the new master",
						h.name, switchLostBound)
				}
				if err := h.l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
					t.Errorf("%s: Unlock after Lost = %v, want ErrNotHeld", h.name, err)
				}
			}

			time.Sleep(time.Until(returned.Add(1500 * time.Millisecond)))
			for _, h := range holds {
				if h.drop {
					continue
				}
				select {
				case at := <-h.lost:
					t.Errorf("%s: Lost closed %v after Failover returned, though its hold is on the new master",
						h.name, at.Sub(returned).Round(time.Millisecond))
				default:
				}
				if err := h.l.Unlock(ctx); err != nil {
					t.Errorf("%s: Unlock of a hold that survived the failover: %v", h.name, err)
				}
			}
		})
	}
}

// TestSwitchCancelsFairGhosts proves that after a Sentinel master switch a
// Client's fair-lock actor takes out of the new master's queue (and its
// timeouts zset) an owner of this Client that it no longer waits for: a
// ghost standing for a cancel that reached only the former master, which
// would otherwise hold up every client's FairLock on the name for the
// ghost's 5+ minute deadline. The live waiter of the same Client is left
// queued and is granted once the holder unlocks, and an entry of another
// Client (the control) stays: the runtime cancels only its own owners.
func TestSwitchCancelsFairGhosts(t *testing.T) {
	const name = "switch-fair-ghost"
	const wait = 5 * time.Minute // the default WithFairLockWaitTimeout
	sen := redistest.StartSentinel(t)
	c := newClient(t, sen.FailoverClient(t, nil))
	ctx := ctxFor(t, 90*time.Second)
	queue, timeouts := redisio.FairQueue(name), redisio.FairTimeouts(name)

	holder, waiter := c.FairLock(name), c.FairLock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("holder Lock: %v", err)
	}
	// The waiter reports through got, never through t.
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	queued := func(rc *redis.Client, owner string) bool {
		_, err := rc.LPos(ctx, queue, owner, redis.LPosArgs{}).Result()
		return err == nil
	}
	master, replica := sen.Master(), sen.Replica()
	mc, rc := master.Client(t), replica.Client(t)
	wOwner := lockactor.OwnerOf(waiter)
	within(t, 5*time.Second, "waiter queued on the master", func() bool { return queued(mc, wOwner) })
	within(t, 5*time.Second, "waiter queued on the replica", func() bool { return queued(rc, wOwner) })

	// The ghost and the control join the replica's queue as fair_lock.lua
	// would have them join: at the tail, with the tail's deadline plus W.
	ghost := c.ID() + ":999999"
	control := uuid.NewString() + ":1"
	if err := rc.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
		t.Fatalf("replica %s: CONFIG SET replica-read-only no: %v", replica.Addr(), err)
	}
	for _, owner := range []string{ghost, control} {
		tail, err := rc.LIndex(ctx, queue, -1).Result()
		if err != nil {
			t.Fatalf("replica: LINDEX %s -1: %v", queue, err)
		}
		deadline, err := rc.ZScore(ctx, timeouts, tail).Result()
		if err != nil {
			t.Fatalf("replica: ZSCORE %s %s: %v", timeouts, tail, err)
		}
		if err := rc.ZAdd(ctx, timeouts, redis.Z{Score: deadline + float64(wait.Milliseconds()), Member: owner}).Err(); err != nil {
			t.Fatalf("replica: ZADD %s: %v", timeouts, err)
		}
		if err := rc.RPush(ctx, queue, owner).Err(); err != nil {
			t.Fatalf("replica: RPUSH %s: %v", queue, err)
		}
	}
	if q, err := rc.LRange(ctx, queue, 0, -1).Result(); err != nil || len(q) != 3 {
		t.Fatalf("replica: LRANGE %s = %q, %v; want waiter, ghost, control", queue, q, err)
	}
	if queued(mc, ghost) || queued(mc, control) {
		t.Fatalf("master has the replica-only entries")
	}

	started := time.Now()
	promoted := sen.Failover(t)
	returned := time.Now()
	if promoted.Addr() != replica.Addr() {
		t.Fatalf("Failover promoted %s, want the replica %s", promoted.Addr(), replica.Addr())
	}
	nc := promoted.Client(t)
	inZset := func(owner string) bool {
		_, err := nc.ZScore(ctx, timeouts, owner).Result()
		return err == nil
	}
	within(t, 5*time.Second, "ghost "+ghost+" gone from the new master's queue and timeouts",
		func() bool { return !queued(nc, ghost) && !inZset(ghost) })
	gone := time.Now()
	t.Logf("ghost gone from the new master %+v relative to Failover's return (%v after it began; Failover took %v)",
		gone.Sub(returned).Round(time.Millisecond), gone.Sub(started).Round(time.Millisecond),
		returned.Sub(started).Round(time.Millisecond))

	select {
	case err := <-got:
		t.Fatalf("waiter returned %v while the holder still holds", err)
	default:
	}
	if !queued(nc, wOwner) || !inZset(wOwner) {
		t.Fatalf("live waiter %s not queued on the new master after the repair", wOwner)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("holder Unlock: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter Lock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("waiter not granted within 5s of the holder's Unlock")
	}
	t.Logf("waiter granted %v after Failover returned", time.Since(returned).Round(time.Millisecond))
	if !queued(nc, control) || !inZset(control) {
		t.Errorf("control %s (another Client's) left the new master's queue or timeouts", control)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Errorf("waiter Unlock: %v", err)
	}
}
