package redisio

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Placing channels: a wanted channel may be on no connection for a while —
// whether to subscribe sharded is not known yet (Topology.Sharded), its
// Cluster master could not be found, or its slot moved away (Redis 7
// tells a shard channel's subscribers with a SUNSUBSCRIBE they did not ask
// for, after a resharding or a failover). The placer puts such channels on
// the connection of their current master, retrying every retryEvery after
// asking go-redis to reload the cluster's slots, until each is placed or
// no longer wanted.

// unplace records channel as wanted but on no connection, and starts the
// placer. The caller holds p.mu.
func (p *PubSub) unplace(channel string) {
	p.unplaced[channel] = true
	if p.placing || p.closed {
		return
	}
	p.placing = true
	p.loops.Add(1)
	go p.place()
}

// unsubscribed handles a SUNSUBSCRIBE reply on s: one we asked for
// (Unsubscribe, Requeue) is counted off; any other means Redis dropped the
// subscription because the channel's slot left this master. The channel's
// handlers hear Disconnected, and it is placed again.
func (p *PubSub) unsubscribed(s *shard, channel string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.leaving[channel]; n > 0 {
		if n == 1 {
			delete(p.leaving, channel)
		} else {
			p.leaving[channel] = n - 1
		}
		return
	}
	if p.shardOf[channel] != s || len(p.handlers[channel]) == 0 || p.closed {
		return
	}
	p.log.Debug("lockactor: shard channel moved; subscribing where its slot lives now", "channel", channel, "from", s.addr)
	delete(p.shardOf, channel)
	delete(p.confirmed, channel)
	for _, h := range p.handlers[channel] {
		h(Event{Kind: Disconnected, Channel: channel})
	}
	p.unplace(channel)
}

// place runs until every unplaced channel is placed or unwanted, or Close.
func (p *PubSub) place() {
	defer p.loops.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		if cc, ok := p.rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
		select {
		case <-p.stop:
			return
		case <-time.After(retryEvery):
		}
		// Asked before p.mu is taken: the questions may wait for the
		// servers (bounded), and subscribers must not.
		sharded := p.topo.Sharded(ctx)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		wanted := make([]string, 0, len(p.unplaced))
		for ch := range p.unplaced {
			wanted = append(wanted, ch)
		}
		p.mu.Unlock()
		addrs := p.locate(ctx, wanted, sharded)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		for ch := range p.unplaced {
			if len(p.handlers[ch]) == 0 {
				delete(p.unplaced, ch)
				continue
			}
			if addr, ok := addrs[ch]; ok && p.joinAt(ctx, ch, addr, sharded, sharded) == nil {
				delete(p.unplaced, ch)
			}
		}
		if len(p.unplaced) == 0 {
			p.placing = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// locate finds the shard address of each channel: "" when not sharded, else
// its slot's master, asked of go-redis's slot map and confirmed with ROLE.
// Right after a failover the map (fetched from a node the news has not
// reached yet) can still name the demoted master, and Redis 7 lets a
// replica take SSUBSCRIBE for its master's slots: a channel placed there
// would stay there, invisible to the master's NUMSUB. A channel whose master
// is not found or not confirmed is left out, for the next round.
func (p *PubSub) locate(ctx context.Context, channels []string, sharded bool) map[string]string {
	addrs := make(map[string]string, len(channels))
	cc, ok := p.rdb.(*redis.ClusterClient)
	if !ok || !sharded {
		for _, ch := range channels {
			addrs[ch] = ""
		}
		return addrs
	}
	isMaster := map[string]bool{}
	for _, ch := range channels {
		node, err := cc.MasterForKey(ctx, ch)
		if err != nil {
			continue
		}
		addr := node.Options().Addr
		master, asked := isMaster[addr]
		if !asked {
			master, _ = saysMaster(ctx, node)
			isMaster[addr] = master
		}
		if master {
			addrs[ch] = addr
		}
	}
	return addrs
}
