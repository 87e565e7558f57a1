package redisio

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Writing to the master the sentinels name, ahead of go-redis. A
// FailoverClient asks one sentinel where the master is, and moves its pool
// when that sentinel announces +switch-master. The other sentinels learn
// of a failover from the one that made it, through hellos they exchange
// every 2 s; until the client's sentinel has, its scripts reach the
// former master, which takes writes until Sentinel re-points it, and a
// replica still attached there can confirm them (WAIT). They are gone
// once it is re-pointed: a torture run granted a lock there 1.1 s after
// the sentinels had named a new master, while another Client held it on
// the new one. The runtime hears every sentinel's +switch-master
// (WatchSentinels); RouteTo then sends the Conn's commands to the named
// master over a client of its own until the pool follows.

// RouteTo sends every command the Conn runs for locks (scripts, reads,
// force unlocks) to the server at addr, over a client of its own, instead
// of the user's client; "" sends them through the user's client again. It
// reports whether the route changed: only a client that follows a
// Sentinel group's master is routed (a FailoverClient, or a
// FailoverClusterClient, whose slot map comes from the same sentinel and
// lags as its pool does).
func (c *Conn) RouteTo(ctx context.Context, addr string) (bool, error) {
	if !followsMaster(c.rdb) {
		return false, nil
	}
	var to redis.UniversalClient = c.rdb
	if addr != "" {
		d, err := c.direct(ctx, addr)
		if err != nil {
			return false, err
		}
		to = d
	}
	c.mu.Lock()
	changed := c.routed != addr
	c.routed = addr
	c.mu.Unlock()
	c.batch.setClient(to)
	return changed, nil
}

// OnServerClient has fn called with each client of one server the Conn
// makes (re-reads after a switch, RouteTo), before its first command, so
// that hooks on the user's client can be put there too. Call it before the
// Conn is used.
func (c *Conn) OnServerClient(fn func(*redis.Client)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onDirect = fn
}

// Routed is the address RouteTo last sent commands to; "" while they go
// through the user's client.
func (c *Conn) Routed() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.routed
}

// cmds is the client the Conn's own commands (those no batcher sends) go
// through: the user's, or while RouteTo has named a server, its client.
func (c *Conn) cmds() redis.UniversalClient {
	c.mu.Lock()
	addr, d := c.routed, c.directs[c.routed]
	c.mu.Unlock()
	if addr == "" || d == nil {
		return c.rdb
	}
	return d
}

// IsMaster reports whether the server at addr says it is a master (ROLE),
// asked over a client of its own within checkTimeout.
func (c *Conn) IsMaster(ctx context.Context, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return Guard(ctx, c, func(ctx context.Context) (bool, error) {
		d, err := c.direct(ctx, addr)
		if err != nil {
			return false, err
		}
		return saysMaster(ctx, d)
	})
}

// saysMaster asks the server behind c for its ROLE and reports whether it
// is a master.
func saysMaster(ctx context.Context, c interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}) (bool, error) {
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 {
		return false, err
	}
	s, _ := role[0].(string)
	return strings.EqualFold(s, "master"), nil
}
