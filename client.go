package lockactor

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/redisio"
)

// Client is the embedded runtime over one Redis deployment. Make one per
// process (or per Redis deployment) and share it; it is safe for concurrent use.
type Client struct {
	id         string
	opts       options
	rt         *actors.Runtime
	nextHandle atomic.Int64
	done       chan struct{} // closed by Close: every waiting call returns ErrClosed
	closeOnce  sync.Once
	cluster    bool     // rdb is a Redis Cluster: names must keep their keys in one slot
	metrics    *metrics // OpenTelemetry instruments (WithMeterProvider)
}

// New starts the embedded runtime over one Redis deployment: a single server, a
// Sentinel failover group or a Cluster (any redis.UniversalClient). The Client
// does not own rdb: Close does not close it. It fails with ErrInvalidArgument
// for a nil rdb or a watchdog timeout <= 0, and sends nothing to Redis.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if isNil(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidArgument)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.watchdog <= 0 {
		return nil, fmt.Errorf("%w: watchdog timeout %v <= 0", ErrInvalidArgument, o.watchdog)
	}
	o.watchdog = redisio.WholeMS(o.watchdog)
	if o.idleAfter <= 0 {
		return nil, fmt.Errorf("%w: idle actor timeout %v <= 0", ErrInvalidArgument, o.idleAfter)
	}
	if o.fairWait <= 0 {
		return nil, fmt.Errorf("%w: fair lock wait timeout %v <= 0", ErrInvalidArgument, o.fairWait)
	}
	if o.syncReplicas != 0 && o.syncTimeout <= 0 {
		return nil, fmt.Errorf("%w: replica sync timeout %v <= 0", ErrInvalidArgument, o.syncTimeout)
	}
	if o.pubsubHealth <= 0 {
		return nil, fmt.Errorf("%w: pub/sub health check %v <= 0", ErrInvalidArgument, o.pubsubHealth)
	}
	if o.spinMin <= 0 || o.spinMax < o.spinMin {
		return nil, fmt.Errorf("%w: spin backoff from %v to %v (needs 0 < min <= max)", ErrInvalidArgument, o.spinMin, o.spinMax)
	}
	cluster := redisio.IsCluster(rdb)
	sharding := redisio.ShardAuto
	if o.sharded != nil {
		sharding = redisio.ShardOff
		if *o.sharded {
			sharding = redisio.ShardOn
		}
	}
	c := &Client{
		id:      uuid.NewString(),
		opts:    o,
		done:    make(chan struct{}),
		cluster: cluster,
		metrics: newMetrics(o),
	}
	c.rt = actors.NewRuntime(rdb, actors.Config{
		ClientID:     c.id,
		Watchdog:     o.watchdog,
		IdleAfter:    o.idleAfter,
		FairWait:     o.fairWait,
		PubSubHealth: o.pubsubHealth,
		SpinMin:      o.spinMin,
		SpinMax:      o.spinMax,
		SpinQuiet:    o.spinQuiet,
		NoRelay:      o.noRelay,
		LatchKeep:    o.latchKeep,
		RunTime:      o.runTime,
		TokenMemory:  o.tokenMemory,
		Logger:       o.logger,
		Observer:     c.metrics,
		ServerClient: o.serverClient,

		Sharding:    sharding,
		ReplicaSync: redisio.SyncPolicy{Replicas: o.syncReplicas, Timeout: o.syncTimeout, AOF: o.syncAOF, Required: o.syncGiven},
	})
	c.metrics.watch(c.rt, o.logger)
	return c, nil
}

func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	v := reflect.ValueOf(rdb)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Close stops every actor and watchdog, drops every subscription and makes
// waiting calls return ErrClosed, within about a second whatever Redis
// does; it is idempotent. Held locks are not released in Redis (they expire
// after their lease, as in Redisson), fair-lock waiters are taken out of
// the queue and the Client's request records deleted, best effort, and
// releases still owed to Redis are abandoned (a lock's lease frees it;
// permits owed to a semaphore stay lost).
//
// Note: after Close no goroutine of the package is left, except one that
// waits for a command stuck in go-redis on a server that does not answer;
// it ends, without touching Redis again, when go-redis returns.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		c.rt.Close()
		c.metrics.unwatch()
	})
	return nil
}

// ID is the client's UUID, the first half of every hash field it writes.
func (c *Client) ID() string { return c.id }

// slotSafe reports whether every key and channel derived from name lands in
// name's own Cluster slot. Auxiliary keys are "prefix:{name}" for a name
// without '{' (so a '}' in it would end the hash tag early: "a}b" puts its
// channel in slot "a") and "prefix:name" for a name with '{', which then
// needs a non-empty hash tag ("{}" or "x{" leave the key hashed whole).
func slotSafe(name string) bool {
	open := strings.IndexByte(name, '{')
	if open < 0 {
		return !strings.Contains(name, "}")
	}
	end := strings.IndexByte(name[open+1:], '}')
	return end > 0
}

// slotProblem is the ErrInvalidArgument text for a name slotSafe refuses.
const slotProblem = "on a Redis Cluster a name needs every key it derives in one slot: " +
	"no '}' without a '{' before it, and a '{' needs a non-empty {hash tag}"

// closed reports whether Close has begun.
func (c *Client) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// newOwner returns a fresh owner id, "<clientUUID>:<handleID>".
func (c *Client) newOwner() string {
	return c.id + ":" + strconv.FormatInt(c.nextHandle.Add(1), 10)
}

// Lock returns a handle on the reentrant lock name (RedissonLock). The handle
// is one owner, reentrant: see the type's documentation, and Mutex for a
// lock that goroutines share. An empty name surfaces as ErrInvalidArgument
// from the handle's first call.
func (c *Client) Lock(name string) *Lock {
	return c.newLock(actors.KindLock, name)
}

// FairLock returns a handle on the fair lock name (RedissonFairLock): waiters
// on every client are granted in the order they asked. Each waiter is queued
// in Redis with a deadline (WithFairLockWaitTimeout, or the call's WithWait)
// after which a waiter that stopped retrying, e.g. a crashed process, is
// skipped. A grant lowers every queued deadline, so its cost grows with the
// number of waiters: O(waiters) per grant.
func (c *Client) FairLock(name string) *Lock {
	return c.newLock(actors.KindFair, name)
}

// FencedLock returns a handle on a reentrant lock that issues fencing tokens:
// each acquisition from zero holds increments redisson_lock_token:{name} in
// the same script, and Token reports it. A resource that remembers the
// highest token it has seen and rejects writes carrying a lower one stays
// safe even when a paused holder wakes up after its lease ran out. A
// Client's tokens for a name never go back, even when the counter does
// after a lossy failover; other Clients' can (see Token).
func (c *Client) FencedLock(name string) *Lock {
	return c.newLock(actors.KindFenced, name)
}

// SpinLock is a reentrant lock in Lock's key layout whose waiters never
// subscribe to pub/sub (RedissonSpinLock): they retry with exponential
// backoff and jitter (WithSpinBackoff), one script per retry per name per
// Client however many goroutines wait, so a release elsewhere is noticed
// at the next retry. It excludes Lock handles and Redisson's RLock and
// RSpinLock of the same name both ways, and behaves as Lock in every other
// way; goroutines of the same Client still get it straight from the
// holder's Unlock.
//
// Note: its releases publish on the lock's channel, so Lock waiters of the
// name wake at once; WithSpinPublish(false) turns that off for services
// that deny pub/sub.
func (c *Client) SpinLock(name string) *Lock {
	return c.newLock(actors.KindSpin, name)
}

func (c *Client) newLock(kind actors.Kind, name string) *Lock {
	return &Lock{c: c, name: name, key: actors.Key{Kind: kind, Name: name}, owner: c.newOwner()}
}
