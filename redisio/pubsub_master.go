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
// checks, every masterCheckEvery, which server the command connections
// reach (its run_id); when that changes, the subscription connection is
// replaced, and the new one dials the master the sentinels name now.

// masterCheckEvery is how often a Sentinel client's subscriptions check
// that commands still reach the server they are subscribed on.
const masterCheckEvery = time.Second

// errMasterMoved replaces a subscription connection left on a former master.
var errMasterMoved = errors.New("commands reach another server now (failover)")

// followsMaster reports whether rdb is a go-redis FailoverClient (Sentinel),
// whose master can change under the same client.
func followsMaster(rdb redis.UniversalClient) bool {
	c, ok := rdb.(*redis.Client)
	return ok && c.Options().Addr == "FailoverClient"
}

// serverID is the run_id of the server p's command connections reach now;
// "" when it cannot be read.
func (p *PubSub) serverID(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, masterCheckEvery)
	defer cancel()
	info, err := p.rdb.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	return infoField(info, "run_id")
}

// masterMoved reports whether the command connections reach another server
// than when s's connection was opened (s.server, recorded then).
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
