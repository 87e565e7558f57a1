package redisio

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Following a Sentinel failover. go-redis's FailoverClient moves its command
// connections to the new master on +switch-master but leaves subscription
// connections where they are. After a graceful failover the old master
// stays an isolated master until the sentinels reconfigure it (10-20 s), so
// a subscription there hears nothing the new master publishes: waiters
// slept until their retry timers. For such a client each receive loop
// checks, every masterCheckEvery, which server a new connection of the
// client reaches; when that changes, the subscription connection is
// replaced, and the new one dials the master the sentinels name now.
//
// The check dials (through the client's own dialer, which asks the
// sentinels) and hangs up without sending a command. It used to send INFO
// for the server's run_id, but go-redis ignores ctx deadlines on socket
// reads unless the user's client has ContextTimeoutEnabled: on a stopped
// master that INFO held the loop for the client's read timeout and its
// retries (4.3 s measured), and Close with it. A dial honours its ctx, and
// a stopped server's kernel still accepts connections.

// masterCheckEvery is how often a Sentinel client's subscriptions check
// that commands still reach the server they are subscribed on.
const masterCheckEvery = time.Second

// errMasterMoved replaces a subscription connection left on a former master.
var errMasterMoved = errors.New("commands reach another server now (failover)")

// followsMaster reports whether rdb reaches a Sentinel group's master,
// which can change under the same client: a go-redis FailoverClient, or a
// FailoverClusterClient (a ClusterClient whose slot map the sentinels give:
// one master for every slot).
func followsMaster(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().Addr == "FailoverClient" && c.Options().Dialer != nil
	case *redis.ClusterClient:
		return !IsCluster(c)
	}
	return false
}

// serverID is the address a new subscription connection of p's client
// reaches now (the master the sentinels name); "" when it cannot be learned
// within masterCheckEvery, or once Close has begun. A FailoverClusterClient
// says it from its slot map, which it reloads on +switch-master: its
// subscriptions follow that map, not the sentinels' latest word.
func (p *PubSub) serverID(ctx context.Context) string {
	if cc, ok := p.rdb.(*redis.ClusterClient); ok {
		ctx, cancel := context.WithTimeout(ctx, masterCheckEvery)
		defer cancel()
		node, err := cc.MasterForKey(ctx, "")
		if err != nil {
			return ""
		}
		return node.Options().Addr
	}
	return masterAddr(ctx, p.rdb)
}

// masterMoved reports whether a new connection reaches another server than
// when s's connection was opened (s.server, recorded then).
func (p *PubSub) masterMoved(ctx context.Context, s *shard) bool {
	id := p.serverID(ctx)
	switch {
	case id == "":
		return false
	case s.server == "":
		s.server = id
		return false
	}
	return id != s.server
}
