package redisio

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/syncx"
)

// Conn runs lock commands on the user's go-redis client.
type Conn struct {
	rdb   redis.UniversalClient
	topo  *Topology  // what the servers can do (sharded pub/sub, replicas)
	sync  SyncPolicy // replica confirmation of changes
	batch *batcher   // scripts pipelined across actors (outside a Cluster)

	// calls counts the goroutines spawn started (guarded commands still
	// running after their caller left, subscriber counts).
	// mu orders its Add against Close: no guarded goroutine starts once
	// Close has begun waiting.
	mu       sync.Mutex
	closed   bool
	calls    sync.WaitGroup
	masters  map[string]*batcher      // a Cluster's batchers, by master address
	directs  map[string]*redis.Client // clients of one server each, for checks after a master switch (master.go)
	routed   string                   // where RouteTo sends commands; "": the user's client (route.go)
	onDirect func(*redis.Client)      // called with each client direct makes (OnServerClient)
	// shadowed is the shadow client (shadow.go); forgets the latches to
	// delete at Close, with the last request each may record.
	shadowed   redis.UniversalClient
	shadowGone bool // closed: no shadow is made again
	forgets    map[string]uint64

	health health // what was last heard from Redis (health.go)

	warnMu sync.Mutex
	warned map[string]bool // once-per-Client warnings already logged (see warnOnce)
}

// ErrClosed is returned once Close has begun. It is the one value behind
// actors.ErrClosed and the root package's ErrClosed, so errors.Is matches
// it whichever layer noticed the closing.
var ErrClosed = errors.New("lockactor: client closed")

// NewConn wraps rdb. It does not take ownership: closing rdb is the caller's.
// topo decides between SPUBLISH (sharded) and PUBLISH in the scripts, and
// where replica sync sends its WAIT; sync says how many replicas confirm.
func NewConn(rdb redis.UniversalClient, topo *Topology, sync SyncPolicy) *Conn {
	c := &Conn{rdb: rdb, topo: topo, sync: sync, masters: make(map[string]*batcher)}
	topo.spawn = c.spawn
	c.batch = newBatcher(c, "", rdb)
	if followsMaster(rdb) {
		c.batch.gen, c.batch.genCancel = context.WithCancel(context.Background())
	}
	return c
}

// publishCmd is the command the scripts announce releases with:
// "spublish" on a sharded Cluster, else "publish" (see Topology.Sharded). It
// may wait for the servers' answer: for calls made on their caller's
// goroutine.
func (c *Conn) publishCmd(ctx context.Context) string {
	return publishName(c.topo.Sharded(ctx))
}

func publishName(sharded bool) string {
	if sharded {
		return "spublish"
	}
	return "publish"
}

// publishArg is the publish command for a script that goes through a
// batcher, without waiting: the command itself once the servers have
// answered, else a placeholder the batcher's flusher replaces as it sends
// the script (resolvePublish), so no actor waits for the question.
func (c *Conn) publishArg() any {
	sharded, ok := c.topo.decided()
	switch {
	case !ok:
		return publishLater{}
	case sharded: // constants: converting them allocates nothing
		return "spublish"
	}
	return "publish"
}

// publishLater stands for the publish command in a queued script's
// arguments until its pipeline is sent.
type publishLater struct{}

// Close refuses new guarded calls and waits until every guarded command that
// outlived its caller has ended, or until deadline. It reports whether all
// ended; the ones that did not are stuck in the go-redis client, which the
// caller owns.
func (c *Conn) Close(deadline time.Time) bool {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	batched := true
	for _, b := range c.batchers() {
		batched = b.close(deadline) && batched
	}
	ended := syncx.WaitUntil(&c.calls, deadline) && batched
	if batched {
		c.forgetAll(deadline) // a batcher still sending could write a latch after
	}
	c.closeDirects()
	c.closeShadow()
	return ended
}

// Guard runs fn on c and returns when fn does or when ctx ends, whichever
// comes first. go-redis ignores ctx deadlines on socket reads unless the user
// enabled ContextTimeoutEnabled, so a hung server would otherwise hold the
// caller for the client's whole read timeout. A command abandoned this way
// still finishes in the background (its result is dropped); Close waits for
// it, within its deadline.
func Guard[T any](ctx context.Context, c *Conn, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil {
		if c.isClosed() {
			return zero, ErrClosed
		}
		v, err := fn(ctx)
		c.noteReply(err)
		return v, err
	}
	type result struct {
		v   T
		err error
	}
	start := time.Now()
	done := make(chan result, 1)
	if !c.spawn(func() {
		v, err := fn(context.WithoutCancel(ctx))
		c.noteReply(err)
		done <- result{v, err}
	}) {
		return zero, ErrClosed
	}
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, c.CtxErr(ctx, start)
	}
}

// ms renders a duration as the whole milliseconds Redis expects, at least 1.
func ms(d time.Duration) string { return strconv.FormatInt(WholeMS(d).Milliseconds(), 10) }

// WholeMS rounds d up to whole milliseconds, at least one, as Redis counts
// a lease: the lease Redis applies is never shorter than the one asked for,
// so a caller's account of a lease, kept in the rounded value, is never
// longer than Redis's.
func WholeMS(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}

// UnlockResult is what one release did.
type UnlockResult int

// The outcomes of the unlock scripts.
const (
	NotHeld    UnlockResult = iota // the owner held nothing; nothing changed
	StillHeld                      // one hold released, others remain
	Released                       // last hold released, waiters told
	Left                           // the owner's last hold released; others still hold
	HandedOver                     // the owner's last hold released and the lock given to the next owner
	// ReleasedQuiet: the last hold released, and nothing published: none
	// was asked for (UnlockQuiet), or the server refused the command (an
	// ACL user denied the channel or PUBLISH). Waiters of other Clients
	// that listen on the lock's channel were not told.
	ReleasedQuiet
)

// Listeners counts the connections that listen on a lock's channel: All
// of them, and those of lockactor Clients (Ours, the subscribers of its
// ListenerMark), ours included while we listen. All is -1 when unknown.
type Listeners struct {
	All, Ours int64
}

// Foreign reports whether a connection that is not a lockactor Client's
// listens: a Redisson client waiting on the lock, most likely.
func (l Listeners) Foreign() bool { return l.All > l.Ours }

// SubscribersThen asks, without waiting, how many connections listen on
// channel, and hands the count to then (on another goroutine, or at once
// when it cannot ask; it must not block). On a Cluster with classic pub/sub
// a node counts only its own subscribers, so the answer is -1: unknown.
// So it is on a master with replicas: Redisson's subscriptionMode=SLAVE
// subscribes on a replica, which the master's count does not include (a
// waiter there starved while our actor handed the lock on locally).
func (c *Conn) SubscribersThen(ctx context.Context, channel string, then func(l Listeners, err error)) {
	if !c.spawn(func() { then(c.subscribers(ctx, channel)) }) {
		then(Listeners{}, ErrClosed)
	}
}

// spawn runs fn on a goroutine that Close waits for; false, and fn does
// not run, once Close has begun.
func (c *Conn) spawn(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.calls.Add(1)
	go func() {
		defer c.calls.Done()
		fn()
	}()
	return true
}

// isClosed reports whether Close has begun.
func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Conn) subscribers(ctx context.Context, channel string) (Listeners, error) {
	unknown := Listeners{All: -1}
	sharded := c.topo.Sharded(ctx)
	if c.topo.real && !sharded {
		return unknown, nil
	}
	b, err := c.batcherFor(ctx, channel)
	if err != nil {
		return Listeners{}, err
	}
	mark := ListenerMark(channel)
	rdb, _ := b.clientGen()
	pipe := rdb.Pipeline()
	var counts *redis.MapStringIntCmd
	if sharded {
		counts = pipe.PubSubShardNumSub(ctx, channel, mark)
	} else {
		counts = pipe.PubSubNumSub(ctx, channel, mark)
	}
	repl := pipe.Info(ctx, "replication")
	_, _ = pipe.Exec(ctx)
	if err := counts.Err(); err != nil {
		return Listeners{}, err
	}
	if repl.Err() != nil || infoField(repl.Val(), "connected_slaves") != "0" {
		return unknown, nil // replicas may have listeners (or INFO is denied)
	}
	return Listeners{All: counts.Val()[channel], Ours: counts.Val()[mark]}, nil
}
