package redisio

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The sentinels' own news of a failover. Asking which server is master
// (Master) on a timer learns of a switch up to a period late; the sentinels
// announce each step of a failover on their pub/sub as it happens. A
// Client cannot be told where the sentinels are (go-redis keeps the
// addresses of a FailoverClient to itself), but every sentinel says hello
// on the master it watches every 2 s (channel __sentinel__:hello, payload
// "ip,port,runid,epoch,master-name,master-ip,master-port,config-epoch"):
// WatchSentinels listens there, and subscribes to each sentinel it hears
// of, with the client's credentials, to the events that mark a failover of
// that master.

// SentinelEvent is one step of a failover a sentinel announced.
type SentinelEvent struct {
	Kind   string // the channel: "+sdown", "+odown", "+try-failover", "+promoted-slave", "+switch-master"
	Master string // for +promoted-slave and +switch-master, the new master's address; else ""
}

// sentinelChannels are the events WatchSentinels reports, in the order a
// failover announces them: the master seen down (by one sentinel, then by
// a quorum), the failover started, the replica promoted (the new master
// takes writes from here on), the new configuration final.
var sentinelChannels = []string{"+sdown", "+odown", "+try-failover", "+promoted-slave", "+switch-master"}

// helloChannel is where sentinels say hello on the servers they watch.
const helloChannel = "__sentinel__:hello"

// helloRetry is the pause after a failed read of the hello channel.
const helloRetry = 100 * time.Millisecond

// sentinelRetry is how long a sentinel that could not be subscribed to is
// left alone before its next hello is taken up again.
const sentinelRetry = 10 * time.Second

// WatchSentinels calls tell with each failover step the sentinels of the
// client's master announce, until ctx ends; it returns once every
// connection it opened is closed. For a client that does not follow a
// Sentinel group's master it returns when ctx ends, having done nothing.
// tell runs on WatchSentinels' goroutines and must not block.
func (c *Conn) WatchSentinels(ctx context.Context, tell func(SentinelEvent)) {
	if !c.FollowsMaster() {
		<-ctx.Done()
		return
	}
	hello := c.rdb.Subscribe(ctx, helloChannel)
	defer hello.Close()
	// A pub/sub read waits for a message whatever its ctx says: closing
	// the subscription is what ends it.
	defer context.AfterFunc(ctx, func() { _ = hello.Close() })()
	w := &sentinelWatch{tell: tell, opt: sentinelOptions(c.rdb), active: map[string]bool{}, tried: map[string]time.Time{}}
	defer w.wg.Wait()
	for {
		msg, err := hello.ReceiveMessage(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// The master is unreachable: go-redis dials again on the next
			// receive; the sentinels already subscribed to keep talking.
			select {
			case <-ctx.Done():
				return
			case <-time.After(helloRetry):
			}
			continue
		}
		addr, master, ok := parseHello(msg.Payload)
		if ok {
			w.watch(ctx, addr, master)
		}
	}
}

// sentinelWatch holds the subscriptions to the sentinels heard of.
type sentinelWatch struct {
	tell func(SentinelEvent)
	opt  redis.Options // the client's credentials and timeouts
	wg   sync.WaitGroup

	mu     sync.Mutex
	active map[string]bool      // sentinel addresses subscribed to
	tried  map[string]time.Time // when each was last taken up
}

// watch subscribes to the sentinel at addr, unless it is subscribed to
// already or was taken up within sentinelRetry; events of masters other
// than master are not told.
func (w *sentinelWatch) watch(ctx context.Context, addr, master string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.active[addr] || time.Since(w.tried[addr]) < sentinelRetry {
		return
	}
	w.active[addr], w.tried[addr] = true, time.Now()
	opt := w.opt
	opt.Addr = addr
	s := redis.NewSentinelClient(&opt)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			delete(w.active, addr) // taken up again from a later hello
			w.mu.Unlock()
		}()
		defer s.Close()
		ps := s.Subscribe(ctx, sentinelChannels...)
		defer ps.Close()
		defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
		if _, err := ps.Receive(ctx); err != nil {
			return // not reachable, or other credentials: polling still covers it
		}
		for {
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil {
				return
			}
			if ev, ok := parseSentinelEvent(msg.Channel, msg.Payload, master); ok {
				w.tell(ev)
			}
		}
	}()
}

// sentinelOptions are the options of the client's connections, for a
// connection to a sentinel: its credentials (a sentinel with a password of
// its own is not reached, and polling covers it), TLS and timeouts.
func sentinelOptions(rdb redis.UniversalClient) redis.Options {
	o := redis.Options{MaxRetries: -1}
	switch r := rdb.(type) {
	case *redis.Client:
		c := r.Options()
		o.Username, o.Password, o.TLSConfig, o.DialTimeout = c.Username, c.Password, c.TLSConfig, c.DialTimeout
	case *redis.ClusterClient:
		c := r.Options()
		o.Username, o.Password, o.TLSConfig, o.DialTimeout = c.Username, c.Password, c.TLSConfig, c.DialTimeout
	}
	return o
}

// parseHello reads a sentinel's hello: its address and the master's name.
func parseHello(payload string) (addr, master string, ok bool) {
	f := strings.Split(payload, ",")
	if len(f) < 8 || f[0] == "" || f[1] == "" || f[4] == "" {
		return "", "", false
	}
	return net.JoinHostPort(f[0], f[1]), f[4], true
}

// parseSentinelEvent reads an event of channel about the master named
// master; ok is false for events of other instances or masters. Payloads:
// "+sdown", "+odown", "+try-failover": "master <name> <ip> <port> ...";
// "+promoted-slave": "slave <ip:port> <ip> <port> @ <name> <old-ip> <old-port>";
// "+switch-master": "<name> <old-ip> <old-port> <new-ip> <new-port>".
func parseSentinelEvent(channel, payload, master string) (SentinelEvent, bool) {
	f := strings.Fields(payload)
	switch channel {
	case "+sdown", "+odown", "+try-failover":
		if len(f) >= 2 && f[0] == "master" && f[1] == master {
			return SentinelEvent{Kind: channel}, true
		}
	case "+promoted-slave":
		if len(f) >= 6 && f[4] == "@" && f[5] == master {
			return SentinelEvent{Kind: channel, Master: net.JoinHostPort(f[2], f[3])}, true
		}
	case "+switch-master":
		if len(f) >= 5 && f[0] == master {
			return SentinelEvent{Kind: channel, Master: net.JoinHostPort(f[3], f[4])}, true
		}
	}
	return SentinelEvent{}, false
}
