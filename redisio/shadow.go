package redisio

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/lockactor/lockactor/scripts"
)

// The shadow is a go-redis client of the Conn's own, on the same servers as
// the user's client and with its options (dialer, credentials, TLS), that
// never retries and keeps every ctx deadline, reads included
// (ContextTimeoutEnabled): for work that must end when its ctx does, even
// on a server that has stopped answering (a closing Client's clean-up), or
// fail at the first refusal (a single attempt's reachability check). It is
// made on first use and closed with the Conn. The user's client is never
// changed.

// shadow returns the Conn's shadow client, making it; nil for a client
// whose options cannot be copied (a Ring). Close closes it after its own
// last use (forgetAll).
func (c *Conn) shadow() redis.UniversalClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shadowed != nil || c.shadowGone {
		return c.shadowed
	}
	switch r := c.rdb.(type) {
	case *redis.Client:
		o := *r.Options()
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries = true, -1, 1
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = 2, 0, 2
		o.PushNotificationProcessor, o.ClientSideCacheConfig = nil, nil
		o.MaintNotificationsConfig = noMaint()
		c.shadowed = redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *r.Options()
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries = true, -1, 1
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = 2, 0, 2
		o.PushNotificationProcessor = nil
		o.MaintNotificationsConfig = noMaint()
		c.shadowed = redis.NewClusterClient(&o)
	}
	return c.shadowed
}

// noMaint is the shadow's own maintenance-notification config, off: the
// user's client writes its own config's Mode as it connects (under a lock
// of its own), so the shadow must not share or even copy it.
func noMaint() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// ForgetAtClose registers a latch to delete when the Conn closes, if it
// still records the request seq or an older one (latch_forget.lua).
func (c *Conn) ForgetAtClose(latch string, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgets == nil {
		c.forgets = make(map[string]uint64)
	}
	c.forgets[latch] = max(c.forgets[latch], seq)
}

// forgetAll deletes the latches registered with ForgetAtClose, in one
// pipeline through the shadow, by deadline. It runs once the batchers have
// sent their last calls, so no request can write a latch after it.
func (c *Conn) forgetAll(deadline time.Time) {
	c.mu.Lock()
	forgets := c.forgets
	c.forgets = nil
	c.mu.Unlock()
	if len(forgets) == 0 {
		return
	}
	sh := c.shadow()
	if sh == nil {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	pipe := sh.Pipeline()
	for latch, seq := range forgets {
		scripts.ForgetLatch.Eval(ctx, pipe, []string{latch}, strconv.FormatUint(seq, 10))
	}
	_, _ = pipe.Exec(ctx) // best effort: a record left behind expires by itself
}

// closeShadow closes the shadow client, if one was made.
func (c *Conn) closeShadow() {
	c.mu.Lock()
	sh := c.shadowed
	c.shadowed, c.shadowGone = nil, true
	c.mu.Unlock()
	if sh != nil {
		_ = sh.Close()
	}
}
