package redisio

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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
	// Disconnected: the subscription connection broke; messages may be lost
	// until the next Subscribed.
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

// healthEvery is how long a receive loop reads before it pings the server to
// find a dead connection; retryEvery spaces reconnect attempts.
const (
	healthEvery = 15 * time.Second
	retryEvery  = 100 * time.Millisecond
)

// PubSub multiplexes the channels of one Client over as few subscription
// connections as the deployment allows: one for a single server or Sentinel
// group (SUBSCRIBE), one per Cluster master in sharded mode (SSUBSCRIBE goes
// to the master that owns the channel's slot). Channels are subscribed when
// their first handler arrives and unsubscribed when the last leaves.
type PubSub struct {
	rdb     redis.UniversalClient
	sharded bool
	log     *slog.Logger

	mu        sync.Mutex
	shards    map[string]*redis.PubSub // by master address; "" when not sharded
	on        map[string]*redis.PubSub // channel -> the connection it is subscribed on
	handlers  map[string]map[uint64]Handler
	confirmed map[string]bool
	nextID    uint64
	closed    bool

	stop  chan struct{}
	loops sync.WaitGroup
}

// NewPubSub prepares a multiplexer on rdb; no connection opens until the first
// Subscribe. sharded selects SSUBSCRIBE (Redis Cluster 7+).
func NewPubSub(rdb redis.UniversalClient, sharded bool, log *slog.Logger) *PubSub {
	return &PubSub{
		rdb:       rdb,
		sharded:   sharded,
		log:       log,
		shards:    make(map[string]*redis.PubSub),
		on:        make(map[string]*redis.PubSub),
		handlers:  make(map[string]map[uint64]Handler),
		confirmed: make(map[string]bool),
		stop:      make(chan struct{}),
	}
}

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("pubsub closed")

// Subscribe adds h to channel and returns the id that Unsubscribe takes. If
// the channel is already confirmed, h receives Subscribed at once.
func (p *PubSub) Subscribe(ctx context.Context, channel string, h Handler) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
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
	// go-redis remembers the channel even when this write fails and
	// resubscribes it on the next connection, so an error is not final.
	return id, p.join(ctx, channel)
}

// join subscribes channel on the connection of its shard, opening it if needed.
func (p *PubSub) join(ctx context.Context, channel string) error {
	if !p.sharded {
		ps := p.shards[""]
		if ps == nil {
			ps = p.rdb.Subscribe(ctx)
			p.open("", ps)
		}
		p.on[channel] = ps
		return ps.Subscribe(ctx, channel)
	}
	addr := ""
	if cc, ok := p.rdb.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			return err
		}
		addr = master.Options().Addr
	}
	if ps := p.shards[addr]; ps != nil {
		p.on[channel] = ps
		return ps.SSubscribe(ctx, channel)
	}
	ps := p.rdb.SSubscribe(ctx, channel) // connects to the slot's master
	p.open(addr, ps)
	p.on[channel] = ps
	return nil
}

// open registers a new connection and starts its receive loop.
func (p *PubSub) open(addr string, ps *redis.PubSub) {
	p.shards[addr] = ps
	p.loops.Add(1)
	go p.loop(ps)
}

// Requeue moves this connection to the back of channel's subscriber list
// (UNSUBSCRIBE and SUBSCRIBE back to back on the one connection). Redis 7.0
// delivers a message to a channel's subscribers in subscription order, so
// the process that subscribed first would win every race a release message
// starts; a winner that requeues lets the others go first next time.
func (p *PubSub) Requeue(ctx context.Context, channel string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.on[channel]
	if ps == nil || p.closed {
		return nil
	}
	if p.sharded {
		if err := ps.SUnsubscribe(ctx, channel); err != nil {
			return err
		}
		return ps.SSubscribe(ctx, channel)
	}
	if err := ps.Unsubscribe(ctx, channel); err != nil {
		return err
	}
	return ps.Subscribe(ctx, channel)
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
	ps := p.on[channel]
	delete(p.on, channel)
	switch {
	case ps == nil:
		return nil
	case p.sharded:
		return ps.SUnsubscribe(ctx, channel)
	}
	return ps.Unsubscribe(ctx, channel)
}

// Close drops every connection and waits for the receive loops to end.
func (p *PubSub) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	for _, ps := range p.shards {
		_ = ps.Close()
	}
	p.mu.Unlock()
	p.loops.Wait()
}

// loop reads one subscription connection until Close and routes each event.
func (p *PubSub) loop(ps *redis.PubSub) {
	defer p.loops.Done()
	ctx := context.Background()
	healthy := true
	for {
		msg, err := ps.ReceiveTimeout(ctx, healthEvery)
		select {
		case <-p.stop:
			return
		default:
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = ps.Ping(ctx) // a dead connection fails here and reconnects
				continue
			}
			if healthy {
				healthy = false
				p.log.Debug("lockactor: pub/sub connection lost", "err", err)
				p.broadcast(ps)
			}
			select {
			case <-p.stop:
				return
			case <-time.After(retryEvery):
			}
			continue
		}
		healthy = true
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				p.deliver(Event{Kind: Subscribed, Channel: m.Channel}, true)
			}
		case *redis.Message:
			p.deliver(Event{Kind: Message, Channel: m.Channel, Payload: m.Payload}, false)
		}
	}
}

// deliver hands ev to the handlers of its channel.
func (p *PubSub) deliver(ev Event, confirm bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.handlers[ev.Channel]
	if confirm && hs != nil {
		p.confirmed[ev.Channel] = true
	}
	for _, h := range hs {
		h(ev)
	}
}

// broadcast tells the handlers of every channel on ps that it broke.
func (p *PubSub) broadcast(ps *redis.PubSub) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch, hs := range p.handlers {
		if p.on[ch] != ps {
			continue
		}
		delete(p.confirmed, ch)
		for _, h := range hs {
			h(Event{Kind: Disconnected, Channel: ch})
		}
	}
}
