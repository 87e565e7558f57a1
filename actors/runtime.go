package actors

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/syncx"
	"github.com/lockactor/lockactor/redisio"
)

// ErrClosed is returned by Send once the runtime is closing (the same
// value as redisio.ErrClosed).
var ErrClosed = redisio.ErrClosed

// Kind names a lock primitive; the same name under two kinds is two actors.
type Kind uint8

// The lock kinds.
const (
	KindLock      Kind = iota // reentrant lock (RedissonLock)
	KindFenced                // reentrant lock with fencing tokens
	KindFair                  // FIFO across clients (RedissonFairLock)
	KindRW                    // read-write lock (RedissonReadWriteLock)
	KindSemaphore             // counting semaphore (RedissonSemaphore)
	KindPermit                // permits with ids and leases (RedissonPermitExpirableSemaphore)
	KindCountDown             // count-down latch (RedissonCountDownLatch)
	KindSpin                  // reentrant lock whose waiters spin, never subscribing (RedissonSpinLock)
	KindGroup                 // MultiLock / RedLock coordinator; the last kind (NumKinds)
)

// tag names the kind in its actors' latch keys.
func (k Kind) tag() string {
	switch k {
	case KindLock:
		return "lock"
	case KindFenced:
		return "fenced"
	case KindFair:
		return "fair"
	case KindRW:
		return "rw"
	case KindSemaphore:
		return "sem"
	case KindPermit:
		return "permit"
	case KindCountDown:
		return "cdl"
	case KindSpin:
		return "spin"
	}
	return "group"
}

// Key identifies one lock actor within a runtime.
type Key struct {
	Kind Kind
	Name string
}

// Config is what every lock actor of a runtime shares.
type Config struct {
	ClientID         string             // the Client's UUID: names its latch keys
	Watchdog         time.Duration      // lease of watchdog-renewed holds; renewal every Watchdog/3
	IdleAfter        time.Duration      // an actor with no holds and no waiters retires after this
	FairWait         time.Duration      // how long a fair-lock waiter stays queued in Redis unless its call gives a wait
	SemaphoreRecheck time.Duration      // how often a semaphore's waiters re-check without a message
	SpinMin, SpinMax time.Duration      // a spin lock's retry backoff: first step and cap (DefaultSpinMin, DefaultSpinMax)
	SpinQuiet        bool               // a spin lock's releases publish nothing (WithSpinPublish(false))
	NoRelay          bool               // every local hand-off goes through Redis (relay.go)
	PubSubHealth     time.Duration      // a silent subscription connection is pinged after this, and replaced if no PONG follows within it
	CloseGrace       time.Duration      // how long Close waits for actors and commands still running
	LatchKeep        time.Duration      // the least life of a request's latch record (see ledger.keepFor)
	RunTime          time.Duration      // a run of local hand-offs' bound in time; 0: HandoffRunTime
	Sharding         redisio.Sharding   // SPUBLISH/SSUBSCRIBE (Redis Cluster 7+) or PUBLISH/SUBSCRIBE
	ReplicaSync      redisio.SyncPolicy // WAIT after each change; a grant too few replicas confirmed is undone
	TokenMemory      int                // fenced lock names whose highest token is remembered by name; 0: DefaultTokenMemory (see tokenMemory)
	Logger           *slog.Logger
	Observer         Observer            // hears renewals, lost holds, hand-offs, Redis errors; nil: nopObserver
	ServerClient     func(*redis.Client) // called with each client of one server the Conn makes (redisio.Conn.OnServerClient)
}

// Runtime is the actor system of one Client and the registry of its lock
// actors.
type Runtime struct {
	cfg    Config
	sched  scheduler       // runs the actors and keeps the time: protoactor and the wall clock, or a test's
	conn   *redisio.Conn   // the Client's connection, for IO; nil under a test's fake
	io     store           // what the actors send to Redis: conn, or a test's fake
	ps     channels        // what the actors listen on
	ctx    context.Context // commands sent by actors; cancelled by Close
	cancel context.CancelFunc
	seq    atomic.Uint64 // numbers every latched request of the Client
	tokens *tokenMemory  // the fencing tokens the Client has seen; outlives the actors
	forced forceBook     // the Client's force unlocks, which stop relays (force.go)
	done   chan struct{} // closed when Close begins

	// stopCtx carries Close's deadline to the clean-up actors do as they
	// stop (a fair waiter's last cancel); set before done closes.
	stopCtx context.Context

	mu      sync.Mutex // serialises spawning and Close
	closed  bool
	locks   sync.Map       // Key -> *entry
	running sync.WaitGroup // one count per lock actor until it has stopped

	// Following a Sentinel group's master (switch.go).
	watches   bool                   // the client follows a master that can change
	watching  sync.WaitGroup         // the watcher and the sentinels' listener, until they have stopped
	fairSeen  sync.Map               // fair lock name -> when its actor last had waiters (UnixNano)
	failover  chan struct{}          // a sentinel announced a failover step (master_watch.go)
	named     atomic.Pointer[string] // the master a sentinel's +switch-master named last, not yet taken
	following atomic.Bool            // a master switch is being followed: no relays
	view      masterView             // the client's sentinel's word (master_watch.go)
	released  releasedBook           // fields released lately, for a switch to check (ghosts.go)
}

// NewRuntime starts an actor system for the lock actors of one Client.
func NewRuntime(rdb redis.UniversalClient, cfg Config) *Runtime {
	cfg = cfg.withDefaults()
	topo := redisio.NewTopology(rdb, cfg.Sharding, cfg.Logger)
	conn := redisio.NewConn(rdb, topo, cfg.ReplicaSync)
	conn.OnServerClient(cfg.ServerClient)
	rt := newRuntimeOn(cfg, conn, redisio.NewPubSub(rdb, topo, cfg.PubSubHealth, cfg.Logger))
	rt.conn = conn
	if conn.FollowsMaster() {
		rt.watches = true
		rt.watching.Add(2)
		go rt.watchMaster()
		go func() {
			defer rt.watching.Done()
			conn.WatchSentinels(rt.ctx, rt.heardFailover)
		}()
	}
	return rt
}

// withDefaults fills in the fields left zero; applying it twice changes
// nothing.
func (cfg Config) withDefaults() Config {
	if cfg.ClientID == "" {
		cfg.ClientID = uuid.NewString()
	}
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = 5 * time.Second
	}
	if cfg.FairWait <= 0 {
		cfg.FairWait = 5 * time.Minute
	}
	if cfg.SemaphoreRecheck <= 0 {
		cfg.SemaphoreRecheck = time.Second
	}
	if cfg.SpinMin <= 0 {
		cfg.SpinMin = DefaultSpinMin
	}
	if cfg.SpinMax <= 0 {
		cfg.SpinMax = DefaultSpinMax
	}
	cfg.SpinMax = max(cfg.SpinMax, cfg.SpinMin)
	if cfg.PubSubHealth <= 0 {
		cfg.PubSubHealth = 5 * time.Second
	}
	if cfg.LatchKeep <= 0 {
		cfg.LatchKeep = defaultLatchKeep
	}
	if cfg.RunTime <= 0 {
		cfg.RunTime = HandoffRunTime
	}
	if cfg.CloseGrace <= 0 {
		cfg.CloseGrace = time.Second
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return cfg
}

// newRuntimeOn starts an actor system whose actors send to io and listen on
// ps (the Client's redisio, or a test's fakes).
func newRuntimeOn(cfg Config, io store, ps channels) *Runtime {
	return newRuntimeWith(cfg, nil, io, ps)
}

// newRuntimeWith is a runtime whose actors sched runs (the state machines'
// unit tests run them on a virtual clock); nil: protoactor and the wall
// clock.
func newRuntimeWith(cfg Config, sched scheduler, io store, ps channels) *Runtime {
	cfg = cfg.withDefaults()
	if sched == nil {
		sched = newProtoScheduler(cfg.Logger)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runtime{
		sched:    sched,
		cfg:      cfg,
		io:       io,
		ps:       ps,
		ctx:      ctx,
		cancel:   cancel,
		tokens:   newTokenMemory(cfg.TokenMemory),
		done:     make(chan struct{}),
		stopCtx:  ctx,
		failover: make(chan struct{}, 1),
	}
}

// minLevel is a slog.Handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

// Enabled drops levels below min.
func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

// WithAttrs keeps the filter on the derived handler.
func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

// WithGroup keeps the filter on the derived handler.
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// IO is the runtime's Redis connection, for calls that need no actor.
func (rt *Runtime) IO() *redisio.Conn { return rt.conn }

// Send delivers msg to the actor of key, spawning it if needed.
func (rt *Runtime) Send(key Key, msg any) error {
	return rt.send(key, nil, msg)
}

// SendGroup delivers msg to the coordinator of group g, named key (KindGroup),
// spawning it if needed.
func (rt *Runtime) SendGroup(key Key, g Group, msg any) error {
	return rt.send(key, func(e *entry) machine { return newGroupActor(rt, key, e, g) }, msg)
}

func (rt *Runtime) send(key Key, produce func(*entry) machine, msg any) error {
	e, err := rt.pin(key, produce)
	if err != nil {
		return err
	}
	e.box.post(msg)
	e.unpin()
	return nil
}

// entry is a registry slot. refs counts senders between lookup and delivery;
// an actor may retire only by swinging refs from 0 to retired, after which no
// sender uses the slot, so no message can land in a stopped mailbox.
type entry struct {
	box  mailbox
	refs atomic.Int64
	// waiters is the number of callers queued in the actor, published by
	// it for Census.
	waiters atomic.Int64
}

const retired = -1 << 40

func (e *entry) pin() bool {
	if e.refs.Add(1) > 0 {
		return true
	}
	e.refs.Add(-1)
	return false
}

func (e *entry) unpin()       { e.refs.Add(-1) }
func (e *entry) retire() bool { return e.refs.CompareAndSwap(0, retired) }

// pin finds or spawns the actor for key (built by produce, or by kind when
// nil) and pins its slot.
func (rt *Runtime) pin(key Key, produce func(*entry) machine) (*entry, error) {
	if v, ok := rt.locks.Load(key); ok && v.(*entry).pin() {
		return v.(*entry), nil
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return nil, ErrClosed
	}
	if v, ok := rt.locks.Load(key); ok && v.(*entry).pin() {
		return v.(*entry), nil
	}
	e := &entry{}
	e.refs.Store(1)
	if produce == nil {
		produce = func(e *entry) machine { return rt.newActor(key, e) }
	}
	rt.running.Add(1)
	e.box = rt.sched.spawn(produce(e))
	rt.locks.Store(key, e)
	return e, nil
}

// newActor builds the actor that serves key's kind.
func (rt *Runtime) newActor(key Key, e *entry) machine {
	switch key.Kind {
	case KindFenced:
		return newLockActor(rt, key, e, fenced{})
	case KindRW:
		return newLockActor(rt, key, e, rw{})
	case KindFair:
		return newFairActor(rt, key, e)
	case KindSemaphore:
		return newSemaphoreActor(rt, key, e)
	case KindPermit:
		return newPermitActor(rt, key, e)
	case KindCountDown:
		return newCountDownActor(rt, key, e)
	case KindSpin:
		a := newLockActor(rt, key, e, reentrant{})
		a.spin = newSpinner(rt.cfg.SpinMin, rt.cfg.SpinMax)
		a.spin.quiet = rt.cfg.SpinQuiet
		return a
	}
	return newLockActor(rt, key, e, reentrant{})
}

// forget removes a retired slot from the registry.
func (rt *Runtime) forget(key Key, e *entry) { rt.locks.CompareAndDelete(key, e) }

// Close stops every lock actor and waits for them, drops the pub/sub
// connections and waits for commands still running on behalf of callers that
// left. Holds are not released in Redis. It returns within CloseGrace (plus
// the time to close connections) whatever Redis does: an actor or a command
// still stuck in the go-redis client then is left to it, and ends as soon as
// go-redis returns, without touching Redis again.
func (rt *Runtime) Close() {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return
	}
	rt.closed = true
	deadline := rt.sched.Now().Add(rt.cfg.CloseGrace)
	stopCtx, cancelStop := context.WithDeadline(context.Background(), deadline)
	defer cancelStop()
	rt.stopCtx = stopCtx
	rt.mu.Unlock()
	close(rt.done)

	rt.locks.Range(func(k, v any) bool {
		v.(*entry).box.stop()
		rt.locks.Delete(k)
		return true
	})
	// Retiring actors are no longer in the registry, but counted here.
	if !syncx.WaitUntil(&rt.running, deadline) {
		rt.cfg.Logger.Warn("lockactor: Close left actors waiting on Redis", "grace", rt.cfg.CloseGrace)
	}
	rt.cancel()
	if !syncx.WaitUntil(&rt.watching, deadline) {
		rt.cfg.Logger.Warn("lockactor: Close left the master watcher waiting on Redis", "grace", rt.cfg.CloseGrace)
	}
	if !rt.ps.Close(deadline) {
		rt.cfg.Logger.Warn("lockactor: Close left a pub/sub connection waiting on Redis", "grace", rt.cfg.CloseGrace)
	}
	rt.io.Close(deadline)
	rt.sched.shutdown(deadline)
}

// shutdownCtx is the context for an actor's clean-up as it stops: Close's
// deadline once Close has begun.
func (rt *Runtime) shutdownCtx() context.Context {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.stopCtx
}

// hasActors reports whether any lock actor is registered, without counting
// them all.
func (rt *Runtime) hasActors() bool {
	found := false
	rt.locks.Range(func(any, any) bool { found = true; return false })
	return found
}

// Actors is the number of lock actors currently registered (retiring ones
// excluded).
func (rt *Runtime) Actors() int {
	n := 0
	rt.locks.Range(func(any, any) bool { n++; return true })
	return n
}
