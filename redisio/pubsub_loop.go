package redisio

import (
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// The receive side of PubSub: one loop per subscription connection reads
// it, routes what arrives to the channels' handlers, pings it when silent,
// and replaces it when it breaks, stops answering or (Sentinel) was left on
// a former master.

// loop reads s's connection until Close, routing each event, pinging a
// silent connection and replacing a broken or unanswering one.
func (p *PubSub) loop(s *shard) {
	defer p.loops.Done()
	ctx := p.ctx
	follow := followsMaster(p.rdb)
	tick := p.health
	if follow {
		tick = min(p.health, masterCheckEvery)
	}
	pinged := false          // a PING is out and nothing has come back since
	var silent time.Duration // since the last thing received
	for {
		p.mu.Lock()
		ps, closed := s.ps, p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		if ps == nil {
			if !p.connect(s) {
				return
			}
			continue
		}
		if follow && s.server == "" {
			s.server = p.serverID(ctx) // the connection was just (re)opened
		}
		msg, err := ps.ReceiveTimeout(ctx, tick)
		var ne net.Error
		switch {
		case err == nil:
			pinged, silent = false, 0
			p.route(s, msg)
			continue
		case errors.As(err, &ne) && ne.Timeout():
			if follow && p.masterMoved(ctx, s) {
				err = errMasterMoved
				break
			}
			if silent += tick; silent < p.health {
				continue
			}
			silent = 0
			if pinged {
				err = errors.New("no PONG within the health period")
				break
			}
			// Silence: ask. A half-open connection accepts the PING and
			// never answers, which the next timeout reveals.
			if err = ps.Ping(ctx); err == nil {
				pinged = true
				continue
			}
		}
		pinged, silent, s.server = false, 0, ""
		if !p.replace(s, ps, err) {
			return
		}
	}
}

// replace tells every channel of s that its connection broke, waits a
// little, and opens a new connection for them. false once Close has begun.
func (p *PubSub) replace(s *shard, old *redis.PubSub, why error) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.log.Debug("lockactor: pub/sub connection lost; reconnecting", "addr", s.addr, "err", why)
	_ = old.Close()
	s.barriers = nil // their PONGs died with the connection
	for ch, at := range p.shardOf {
		if at != s {
			continue
		}
		delete(p.confirmed, ch)
		delete(p.leaving, ch) // replies to our unsubscribes died with the connection
		for _, h := range p.handlers[ch] {
			h(Event{Kind: Disconnected, Channel: ch})
		}
	}
	p.mu.Unlock()
	select {
	case <-p.stop:
		return false
	case <-time.After(retryEvery):
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	if s.sharded {
		// Sharded: the slots of these channels may have moved to other
		// masters (a failover, a resharding); each is placed again where
		// its slot lives now, and this connection's loop ends.
		p.dropShard(s)
		p.mu.Unlock()
		return false
	}
	s.ps = nil
	p.mu.Unlock()
	return p.connect(s)
}

// route hands one message received on s to the handlers of its channel.
func (p *PubSub) route(s *shard, msg any) {
	switch m := msg.(type) {
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			p.deliver(Event{Kind: Subscribed, Channel: m.Channel}, true)
		case "sunsubscribe":
			p.unsubscribed(s, m.Channel)
		}
	case *redis.Message:
		p.deliver(Event{Kind: Message, Channel: m.Channel, Payload: m.Payload}, false)
	case *redis.Pong:
		if m.Payload == barrierPayload {
			p.passed(s)
		}
	}
}

// passed calls the oldest barrier of s, whose PONG just came back.
func (p *PubSub) passed(s *shard) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(s.barriers) == 0 {
		return
	}
	then := s.barriers[0]
	s.barriers[0] = nil
	s.barriers = s.barriers[1:]
	then()
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
