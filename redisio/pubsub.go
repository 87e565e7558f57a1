package redisio

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/syncx"
)

// EventKind says what a pub/sub Event reports.
type EventKind int

// The pub/sub events a lock actor reacts to.
const (
	// Message: a payload arrived on the channel.
	Message EventKind = iota
	// Subscribed: Redis confirmed the subscription (also after a reconnect).
	// Messages published before it may have been missed.
	Subscribed
	// Disconnected: the subscription connection broke or stopped answering;
	// messages may be lost until the next Subscribed.
	Disconnected
)

// Event is one pub/sub notification for one channel.
type Event struct {
	Kind    EventKind
	Channel string
	Payload string
}

// Handler receives the events of one channel. It runs on a receive loop's
// goroutine and must not block (lock actors only post a message).
type Handler func(Event)

// retryEvery spaces the replacements of a connection that keeps failing.
const retryEvery = 100 * time.Millisecond

// PubSub multiplexes the channels of one Client over as few subscription
// connections as the deployment allows: one for a single server or Sentinel
// group (SUBSCRIBE), one per Cluster master in sharded mode (SSUBSCRIBE goes
// to the master that owns the channel's slot).
//
// It keeps the set of wanted channels itself and treats each go-redis
// PubSub as disposable: any error on a connection, and a PING left
// unanswered for a health period (a half-open connection), replaces it with
// a new one subscribed to every wanted channel of its shard. So no path
// leaves a handler registered on a channel that is not subscribed, or about
// to be again.
type PubSub struct {
	rdb    redis.UniversalClient
	topo   *Topology     // decides SSUBSCRIBE (sharded) or SUBSCRIBE
	health time.Duration // silence before a PING; as long again for its PONG
	log    *slog.Logger

	mu        sync.Mutex
	shards    map[string]*shard // by master address; "" when not sharded
	handlers  map[string]map[uint64]Handler
	shardOf   map[string]*shard // channel -> its shard
	confirmed map[string]bool
	unplaced  map[string]bool // wanted channels on no connection yet
	leaving   map[string]int  // SUNSUBSCRIBE replies we asked for, by channel
	placing   bool            // the placer runs
	nextID    uint64
	closed    bool

	stop  chan struct{}   // closed by Close: a loop waiting to reconnect ends
	ctx   context.Context // the loops' own work (the master check); cancelled by Close
	quit  context.CancelFunc
	loops sync.WaitGroup

	// failCommand, set only by tests, makes a subscribe (on) or unsubscribe
	// command on channel fail as a broken write would.
	failCommand func(on bool, channel string) error
}

// shard is one subscription connection and the loop that reads it.
type shard struct {
	addr    string
	sharded bool          // SSUBSCRIBE (else SUBSCRIBE), as Topology said when it opened
	ps      *redis.PubSub // replaced by the loop after a failure
	server  string        // address behind the connection (Sentinel only; see masterMoved)
	// located: its address was confirmed as the master of its first
	// channel's slot just before it was made (the placer's locate), so
	// connect need not ask again.
	located bool
	// barriers wait for the PONGs of their PINGs on this connection, in
	// the order sent (see Barrier); dropped with the connection.
	barriers []func()
}

// NewPubSub prepares a multiplexer on rdb; no connection opens until the first
// Subscribe. topo decides between SSUBSCRIBE (a sharded Cluster) and
// SUBSCRIBE, at the first Subscribe. A connection silent for health is
// pinged, and replaced when no PONG follows within health.
func NewPubSub(rdb redis.UniversalClient, topo *Topology, health time.Duration, log *slog.Logger) *PubSub {
	ctx, quit := context.WithCancel(context.Background())
	return &PubSub{
		ctx:       ctx,
		quit:      quit,
		rdb:       rdb,
		topo:      topo,
		health:    health,
		log:       log,
		shards:    make(map[string]*shard),
		handlers:  make(map[string]map[uint64]Handler),
		shardOf:   make(map[string]*shard),
		confirmed: make(map[string]bool),
		unplaced:  make(map[string]bool),
		leaving:   make(map[string]int),
		stop:      make(chan struct{}),
	}
}

// errPubSubClosed is returned by Subscribe after Close.
var errPubSubClosed = errors.New("pubsub closed")

// Subscribe adds h to channel and returns the id that Unsubscribe takes. If
// the channel is already confirmed, h receives Subscribed at once. An error
// means the channel could not be placed on a connection yet (no cluster
// topology); h stays registered, the channel is placed in the background as
// soon as the servers allow, and h then receives Subscribed.
func (p *PubSub) Subscribe(ctx context.Context, channel string, h Handler) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errPubSubClosed
	}
	p.nextID++
	id := p.nextID
	hs := p.handlers[channel]
	if hs == nil {
		hs = make(map[uint64]Handler)
		p.handlers[channel] = hs
	}
	hs[id] = h
	if len(hs) > 1 {
		if p.confirmed[channel] {
			h(Event{Kind: Subscribed, Channel: channel})
		}
		return id, nil
	}
	sharded, ok := p.topo.decided()
	if !ok {
		// Whether to SSUBSCRIBE is not known yet: the placer asks (off
		// this goroutine and p.mu) and subscribes.
		p.unplace(channel)
		return id, nil
	}
	err := p.join(ctx, channel, sharded)
	if err != nil {
		p.unplace(channel)
	}
	return id, err
}

// join subscribes channel on the connection of its shard: the connection
// of the channel's Cluster master when sharded (SSUBSCRIBE), the one
// connection otherwise. A new shard's connection is opened by its loop, off
// p.mu and off the caller's goroutine (go-redis dials and handshakes there,
// ignoring ctx on the handshake's reads). The caller holds p.mu.
func (p *PubSub) join(ctx context.Context, channel string, sharded bool) error {
	addr := ""
	if cc, ok := p.rdb.(*redis.ClusterClient); ok && sharded {
		master, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			return err
		}
		addr = master.Options().Addr
	}
	return p.joinAt(ctx, channel, addr, sharded, false)
}

// joinAt subscribes channel on the shard at addr, starting it if needed;
// located: addr was just confirmed as the channel's master (see locate).
// The caller holds p.mu.
func (p *PubSub) joinAt(ctx context.Context, channel, addr string, sharded, located bool) error {
	s := p.shards[addr]
	if s == nil {
		s = &shard{addr: addr, sharded: sharded, located: located}
		p.shards[addr] = s
		p.shardOf[channel] = s
		p.loops.Add(1)
		go p.loop(s)
		return nil
	}
	p.shardOf[channel] = s
	return p.command(ctx, s, true, channel)
}

// connect opens s's connection for the channels placed on it, off p.mu; a
// channel joined or left while it dialled is subscribed or unsubscribed
// once the connection is there. A sharded shard opens for the channel that
// started it and joins the others one by one, so no SSUBSCRIBE spans slots.
// false once Close has begun.
func (p *PubSub) connect(s *shard) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	chans := p.channelsOf(s)
	if s.sharded && len(chans) > 1 {
		chans = chans[:1]
	}
	p.mu.Unlock()
	if s.sharded && !s.located && len(chans) == 1 && p.locate(p.ctx, chans, true)[chans[0]] != s.addr {
		return p.abandon(s) // not (or no longer) the channel's master
	}
	var ps *redis.PubSub
	if s.sharded {
		ps = p.rdb.SSubscribe(p.ctx, chans...)
	} else {
		ps = p.rdb.Subscribe(p.ctx, chans...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = ps.Close()
		return false
	}
	s.ps = ps
	opened := make(map[string]bool, len(chans))
	for _, ch := range chans {
		opened[ch] = true
		if p.shardOf[ch] != s {
			_ = p.command(p.ctx, s, false, ch) // left while dialling
		}
	}
	for _, ch := range p.channelsOf(s) {
		if !opened[ch] {
			_ = p.command(p.ctx, s, true, ch) // joined while dialling
		}
	}
	return true
}

// abandon drops the sharded shard s before it connected (see dropShard).
// It returns false, and s's loop ends.
func (p *PubSub) abandon(s *shard) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropShard(s)
	return false
}

// dropShard forgets the sharded shard s and places each of its channels
// again where its slot lives now. The caller holds p.mu.
func (p *PubSub) dropShard(s *shard) {
	if p.shards[s.addr] == s {
		delete(p.shards, s.addr)
	}
	for ch, at := range p.shardOf {
		if at == s {
			delete(p.shardOf, ch)
			p.unplace(ch)
		}
	}
}

// channelsOf lists the wanted channels placed on s. The caller holds p.mu.
func (p *PubSub) channelsOf(s *shard) []string {
	var chans []string
	for ch, at := range p.shardOf {
		if at == s {
			chans = append(chans, ch)
		}
	}
	return chans
}

// command subscribes (on) or unsubscribes channel on s's connection. A failed
// write may leave go-redis's own record of the channels out of step with
// ours, so the connection is dropped: the loop opens a new one from our
// record. The caller holds p.mu.
func (p *PubSub) command(ctx context.Context, s *shard, on bool, channel string) error {
	if s.ps == nil {
		return nil // connect subscribes what is placed on s once it has dialled
	}
	var err error
	if p.failCommand != nil {
		err = p.failCommand(on, channel)
	}
	switch {
	case err != nil:
	case on && s.sharded:
		err = s.ps.SSubscribe(ctx, channel)
	case on:
		err = s.ps.Subscribe(ctx, channel)
	case s.sharded:
		p.leaving[channel]++
		err = s.ps.SUnsubscribe(ctx, channel)
	default:
		err = s.ps.Unsubscribe(ctx, channel)
	}
	if err != nil {
		p.broken(s, channel, err)
	}
	return err
}

// broken drops the connection of s after a command on it (for channel)
// failed; its loop reconnects.
func (p *PubSub) broken(s *shard, channel string, err error) {
	p.log.Debug("lockactor: pub/sub command failed; reconnecting", "channel", channel, "err", err)
	_ = s.ps.Close()
}

// Requeue moves this connection to the back of channel's subscriber list
// (UNSUBSCRIBE and SUBSCRIBE back to back on the one connection). Redis 7.0
// delivers a message to a channel's subscribers in subscription order, so
// the process that subscribed first would win every race a release message
// starts; a winner that requeues lets the others go first next time. If
// either step fails the connection is replaced, which subscribes the channel
// again.
func (p *PubSub) Requeue(ctx context.Context, channel string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.shardOf[channel]
	if s == nil || p.closed {
		return nil
	}
	if err := p.command(ctx, s, false, channel); err != nil {
		return err
	}
	return p.command(ctx, s, true, channel)
}

// ErrNoBarrier is returned by Barrier when channel is not subscribed on a
// live connection yet: its next Subscribed event will say when it is.
var ErrNoBarrier = errors.New("pubsub: channel not subscribed yet")

// barrierPayload tells a barrier's PONG from the health check's.
const barrierPayload = "lockactor-barrier"

// Barrier sends a PING on the connection that carries channel and calls
// then when its PONG comes back, on the goroutine that delivers channel's
// events, after every message that arrived before the PONG and before any
// that arrives after it. A message a handler hears after then ran was
// therefore published after the PING reached Redis: after anything the
// caller did before calling Barrier. then is not called if the connection
// breaks first (handlers hear Disconnected); it must not block.
func (p *PubSub) Barrier(ctx context.Context, channel string, then func()) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.shardOf[channel]
	if p.closed || s == nil || s.ps == nil || !p.confirmed[channel] {
		return ErrNoBarrier
	}
	s.barriers = append(s.barriers, then)
	if err := s.ps.Ping(ctx, barrierPayload); err != nil {
		s.barriers = s.barriers[:len(s.barriers)-1]
		p.broken(s, channel, err)
		return err
	}
	return nil
}

// Unsubscribe removes the handler id from channel, and the channel from its
// connection when it was the last.
func (p *PubSub) Unsubscribe(ctx context.Context, channel string, id uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.handlers[channel]
	delete(hs, id)
	if len(hs) > 0 || p.closed {
		return nil
	}
	delete(p.handlers, channel)
	delete(p.confirmed, channel)
	delete(p.unplaced, channel)
	s := p.shardOf[channel]
	delete(p.shardOf, channel)
	if s == nil {
		return nil
	}
	return p.command(ctx, s, false, channel)
}

// Close drops every connection and waits, until deadline, for the receive
// loops to end; it reports whether they all did. A loop still running then
// is inside go-redis (a reconnection's handshake with a server that does
// not answer) and ends when go-redis returns, without touching Redis again.
func (p *PubSub) Close(deadline time.Time) bool {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
		p.quit()
		for _, s := range p.shards {
			if s.ps != nil {
				_ = s.ps.Close()
			}
		}
	}
	p.mu.Unlock()
	return syncx.WaitUntil(&p.loops, deadline)
}
