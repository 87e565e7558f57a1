package lockactor

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/redisio"
)

// Option configures a Client in New.
type Option func(*options)

type options struct {
	watchdog  time.Duration
	logger    *slog.Logger
	idleAfter time.Duration
	fairWait  time.Duration
	sharded   *bool // nil: decided by the servers (see WithShardedPubSub)

	syncReplicas int           // WithReplicaSync
	syncTimeout  time.Duration // WithReplicaSync
	syncGiven    bool          // WithReplicaSync was passed: a requirement
	syncAOF      bool          // WithReplicaSyncAOF

	pubsubHealth time.Duration
	spinMin      time.Duration // WithSpinBackoff
	spinMax      time.Duration // WithSpinBackoff
	spinQuiet    bool          // WithSpinPublish(false)
	noRelay      bool          // WithRelay(false)
	latchKeep    time.Duration // withLatchKeep; 0: the runtime's default
	runTime      time.Duration // withRunTime; 0: the runtime's default
	tokenMemory  int           // withTokenMemory; 0: the runtime's default

	meterProvider metric.MeterProvider // nil: otel.GetMeterProvider() at New
	metricNames   bool                 // WithMetricsLockNames

	serverClient func(*redis.Client) // WithServerClients
}

func defaultOptions() options {
	return options{
		watchdog:  30 * time.Second,
		logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		idleAfter: 5 * time.Second,
		fairWait:  5 * time.Minute,

		pubsubHealth: 5 * time.Second,
		spinMin:      actors.DefaultSpinMin,
		spinMax:      actors.DefaultSpinMax,
		syncReplicas: -1,
		syncTimeout:  time.Second,
	}
}

// WithWatchdogTimeout sets the lease of holds taken without WithLease; the
// watchdog renews them every d/3 while they are held, and a holder that
// crashes frees the lock at most d later. Default 30s; d <= 0 makes New
// fail. Like every lease it counts in whole milliseconds, rounded up.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(o *options) { o.watchdog = d }
}

// WithLogger routes the runtime's logs (lost locks, renewal failures, actor
// errors) to l. Default: discard. A nil l keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithIdleActorTimeout sets how long a lock's actor lives with no holds and no
// waiters before it is reclaimed (and its channel unsubscribed). Default 5s.
func WithIdleActorTimeout(d time.Duration) Option {
	return func(o *options) { o.idleAfter = d }
}

// WithFairLockWaitTimeout sets how long a FairLock waiter stays in the
// Redis queue, beyond the wait of the waiters ahead of it, without retrying;
// a waiter whose process died is skipped after it. A TryLock with WithWait
// uses its wait instead. Default 5 minutes, as in Redisson.
func WithFairLockWaitTimeout(d time.Duration) Option {
	return func(o *options) { o.fairWait = d }
}

// WithPubSubHealthCheck sets how long a subscription connection may stay
// silent before the runtime pings it; a connection that does not answer the
// ping within as long again (a half-open TCP connection, a server that
// stopped) is replaced and every channel on it subscribed again, after which
// every waiter makes a fresh attempt. Until then, waiters on it fall back on
// their timers (at most the holder's lease). Default 5s; d <= 0 makes New
// fail.
func WithPubSubHealthCheck(d time.Duration) Option {
	return func(o *options) { o.pubsubHealth = d }
}

// WithSpinBackoff sets how a SpinLock's waiters space their attempts while
// the lock is held in another process: the first wait is about min, each
// refusal doubles it up to max, and each wait is drawn at random between
// half of it and all of it, so that waiters of many Clients refused at the
// same moment do not retry in step. A wait never runs past the holder's
// remaining lease. Default 1ms and 128ms, Redisson's ExponentialBackOff. A
// lower max answers a release sooner and costs more scripts while waiting:
// one per max per lock name per Client, however many of its goroutines
// wait. min <= 0 or max < min makes New fail.
func WithSpinBackoff(min, max time.Duration) Option {
	return func(o *options) { o.spinMin, o.spinMax = min, max }
}

// WithSpinPublish chooses whether a SpinLock's releases (an owner's last
// Unlock, the end of a run of local hand-offs, ForceUnlock) publish on the
// lock's channel, as Lock's do. On (the default), Lock waiters of the name,
// this library's or Redisson's RLock, wake at once; a server that refuses
// the publish (an ACL) does not fail the release, and the Client logs one
// warning. Off, nothing is published, as Redisson's RSpinLock: those Lock
// waiters take the lock at their next retry, at most the holder's lease
// after its release. SpinLock waiters never need the message.
func WithSpinPublish(on bool) Option {
	return func(o *options) { o.spinQuiet = !on }
}

// WithRelay chooses how a Lock or Mutex held by one owner of
// this Client passes to the next owner of this Client waiting for it. On
// (the default), the next owner takes over the hold Redis has, with no
// round trip: the lock stays in Redis under the first owner's hash field
// until the last owner of the run releases it (a run ends after 64
// owners or 20 ms when other processes wait). Off, every hand-off is a
// script that moves the hold to the next owner's field. Either way the
// next owner's hold is no longer than the one Redis confirmed.
//
// Note: only holds renewed by the watchdog are relayed, and only while
// Redis confirmed them within half the watchdog timeout, since the Client
// last subscribed to the lock's channel and since its own last ForceUnlock
// of the name, and while that subscription is up and brings the Client's
// own release messages back on time; a WithLease hold, a FencedLock (each grant takes
// a token) and a SpinLock (it hears no force unlock) always hand off
// through Redis.
func WithRelay(on bool) Option {
	return func(o *options) { o.noRelay = !on }
}

// WithShardedPubSub chooses how releases are announced: SPUBLISH/SSUBSCRIBE
// (sharded, Redis 7+) or PUBLISH/SUBSCRIBE. Default: sharded on a
// *redis.ClusterClient whose masters have SPUBLISH (asked once, in the
// background at the first lock operation, the first master to answer
// deciding; a Redis 6 Cluster gets the classic commands), as
// Redisson 3.22+ does there; classic elsewhere, including a ClusterClient
// with ClusterSlots set (redis.NewFailoverClusterClient over a Sentinel
// group), which is not a Redis Cluster. Turn it off on a cluster
// shared with Java clients older than 3.22.
func WithShardedPubSub(on bool) Option {
	return func(o *options) { o.sharded = &on }
}

// WithReplicaSync makes every acquire, renewal and release script wait, in
// the same round trip on the key's master, for replicas replicas to confirm
// it (WAIT, or WAITAOF with WithReplicaSyncAOF) within timeout, as
// Redisson's checkLockSyncedSlaves does. replicas < 0 counts every replica
// the master reports connected, 0 turns sync off; the default is
// WithReplicaSync(-1, time.Second). A grant too few replicas confirmed is
// undone (TryLock returns ErrNotReplicated, Lock keeps trying); a renewal
// too few confirmed extends nothing, so Lost closes where the last
// confirmed lease ends; Extend returns ErrNotReplicated; a release stands.
// timeout <= 0 with sync on makes New fail.
//
// Note: "every connected replica" can be none, and under the default a
// server that refuses WAIT turns sync off for itself; where a grant must
// survive a failover, pass an explicit count, which stays a requirement
// (docs/DEPLOYMENT.md, "Replica sync").
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	return func(o *options) { o.syncReplicas, o.syncTimeout, o.syncGiven = replicas, timeout, true }
}

// WithReplicaSyncAOF confirms changes with WAITAOF 0 N instead of WAIT N
// when on: the N replicas have written the change to their AOF (fsync per
// their appendfsync), not only received it. Every replica counted must run
// with appendonly yes: a replica without AOF never acknowledges WAITAOF,
// so with it among the required ones every grant would be undone. The
// master's own AOF plays no part. WAITAOF needs Redis 7.2; where the server
// lacks it WAIT confirms instead, with one warning. Default off: WAIT,
// whatever the master's appendonly says. It does nothing while replica
// sync is off.
func WithReplicaSyncAOF(on bool) Option {
	return func(o *options) { o.syncAOF = on }
}

// WithMeterProvider sends OpenTelemetry metrics to mp; default: the global
// provider (a no-op unless the service installed one). The instruments, all
// named lockactor.*, are created once per Client; see WithMetricsLockNames
// for the lock name as an attribute. A nil mp keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) {
		if mp != nil {
			o.meterProvider = mp
		}
	}
}

// WithMetricsLockNames adds the lock's name to every metric as the
// attribute lock.name when on. Default off: each distinct name becomes its
// own time series in every lockactor.* metric, so cardinality grows with
// the number of names used (unbounded for names built from IDs), and with
// it the memory of the SDK and the cost of the backend. Turn it on only for
// a small, fixed set of names. With it on, each measurement also allocates
// its attribute set.
func WithMetricsLockNames(on bool) Option {
	return func(o *options) { o.metricNames = on }
}

// WithServerClients has fn called with each go-redis client the Client
// makes of one server by itself, as it makes it: on a Sentinel group, after
// a failover, the Client reads its holds on the new master, and sends its
// commands there until the go-redis client's pool follows, over clients of
// its own made from the go-redis client's options (see docs/DEPLOYMENT.md,
// "What Sentinel cannot promise"). Hooks added to the go-redis client
// (tracing, metrics) are not on those; add them in fn (c.AddHook), as with
// go-redis's ClusterClient.OnNewNode. fn must not block; nil (the default)
// does nothing.
func WithServerClients(fn func(c *redis.Client)) Option {
	return func(o *options) { o.serverClient = fn }
}

// withLatchKeep sets the least time a request's latch record is kept in
// Redis (see docs/PROTOCOL.md, "The latch"). Tests shorten it to reach
// outages longer than a record's life; it is not public API.
func withLatchKeep(d time.Duration) Option {
	return func(o *options) { o.latchKeep = d }
}

// withRunTime sets how long a run of local hand-offs may last before a
// release frees the lock for everyone (actors.HandoffRunTime). Tests
// lengthen it so that a slow machine does not end a run they count; it is
// not public API.
func withRunTime(d time.Duration) Option {
	return func(o *options) { o.runTime = d }
}

// withTokenMemory sets how many fenced lock names the Client remembers the
// highest token of by name (actors.DefaultTokenMemory). Tests shrink it to
// make names fall out of the memory; it is not public API.
func withTokenMemory(n int) Option {
	return func(o *options) { o.tokenMemory = n }
}

// LockOption configures one acquisition.
type LockOption func(*lockOptions)

type lockOptions struct {
	lease time.Duration // 0: watchdog
	wait  time.Duration // TryLock only; 0: one attempt
}

// WithLease acquires with a fixed lease: the lock expires d after acquisition
// unless unlocked first, and no watchdog runs. Default (or d == 0): no fixed
// lease, the watchdog keeps renewing. d < 0 is ErrInvalidArgument.
//
// Redis counts leases in whole milliseconds: d is rounded up to one. The
// lease counts from when the acquire script is sent, so a grant whose reply
// comes back after its lease has run out is given back and tried again,
// never handed out; a lease shorter than a round trip to Redis can
// therefore never be granted (Lock waits for its ctx, TryLock reports
// false).
func WithLease(d time.Duration) LockOption {
	return func(o *lockOptions) { o.lease = d }
}

// WithWait bounds how long TryLock waits for the lock. Default 0: one attempt.
// d < 0 is ErrInvalidArgument, and so is WithWait given to Lock, which
// waits until it holds or its ctx ends.
func WithWait(d time.Duration) LockOption {
	return func(o *lockOptions) { o.wait = d }
}

// lockOptionsOf applies opts and validates the result.
func lockOptionsOf(k kind, name string, opts []LockOption) (lockOptions, error) {
	var o lockOptions
	if len(opts) > 0 {
		o = applyLockOptions(opts)
	}
	if o.lease != 0 {
		if err := checkLease(k, name, o.lease); err != nil {
			return o, err
		}
		o.lease = redisio.WholeMS(o.lease)
	}
	if o.wait < 0 {
		return o, k.invalid(name, "negative wait")
	}
	return o, nil
}

// checkLease refuses a fixed lease (WithLease, Extend, a permit's) that is
// not positive.
func checkLease(k kind, name string, lease time.Duration) error {
	if lease <= 0 {
		return k.invalid(name, fmt.Sprintf("lease %v <= 0", lease))
	}
	return nil
}

// applyLockOptions applies opts to the defaults. Apart from lockOptionsOf
// so that a call without options keeps its lockOptions off the heap (an
// option is an unknown function, so what it is handed escapes).
func applyLockOptions(opts []LockOption) lockOptions {
	var o lockOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}
