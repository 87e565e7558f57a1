package redisio

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// A master switch (Sentinel). Between the moment the sentinels name a new
// master and the moment the go-redis client's command connections follow
// (its +switch-master, at the end of the failover), scripts still reach the
// former master, and a replica still attached there may confirm them (WAIT)
// before Sentinel re-points it and its copy is replaced by the new master's.
// What was written there in that time is gone. So the runtime asks, while
// it has holds or waiters, which server the sentinels name; when that
// changes, it reads its holds on that server directly, through a client of
// its own (HoldsOnThen, QueuedOnThen), until the client's pool reaches it
// too (PoolReaches).

// FollowsMaster reports whether the Conn's client follows a Sentinel
// group's master, which can change under it (see followsMaster).
func (c *Conn) FollowsMaster() bool { return followsMaster(c.rdb) }

// Master is the address of the server a new connection of the client
// reaches now: the master the sentinels name. "" when it cannot be learned
// within masterCheckEvery, or once Close has begun.
func (c *Conn) Master(ctx context.Context) string {
	if c.isClosed() {
		return ""
	}
	return masterAddr(ctx, c.rdb)
}

// masterAddr is Master for rdb (a client followsMaster accepts), asked
// of the sentinels afresh the way the client itself asks them: a
// FailoverClusterClient through its ClusterSlots function, a
// FailoverClient through its dialer, whose connection is closed at once
// without a command (a stopped server's kernel still accepts it, and a
// dial honours ctx where a read might not).
func masterAddr(ctx context.Context, rdb redis.UniversalClient) string {
	ctx, cancel := context.WithTimeout(ctx, masterCheckEvery)
	defer cancel()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		slots, err := cc.Options().ClusterSlots(ctx)
		if err != nil || len(slots) == 0 || len(slots[0].Nodes) == 0 {
			return ""
		}
		return slots[0].Nodes[0].Addr
	}
	opt := rdb.(*redis.Client).Options()
	conn, err := opt.Dialer(ctx, opt.Network, opt.Addr)
	if err != nil {
		return ""
	}
	addr := conn.RemoteAddr().String()
	_ = conn.Close()
	return addr
}

// direct is a go-redis client of addr alone, with the options of the
// user's client (credentials, TLS, timeouts), made once per address and
// closed with the Conn.
func (c *Conn) direct(ctx context.Context, addr string) (*redis.Client, error) {
	c.mu.Lock()
	d := c.directs[addr]
	c.mu.Unlock()
	if d != nil {
		return d, nil
	}
	var template redis.Options
	switch r := c.rdb.(type) {
	case *redis.ClusterClient: // a FailoverClusterClient: a node's options
		node, err := r.MasterForKey(ctx, "")
		if err != nil {
			return nil, err
		}
		template = *node.Options()
	case *redis.Client: // a FailoverClient: its dialer asks the sentinels
		template = *r.Options()
		template.Dialer = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if d := c.directs[addr]; d != nil {
		return d, nil
	}
	template.Addr = addr
	template.PoolSize, template.MinIdleConns, template.MaxIdleConns = 4, 0, 4
	// Per-client machinery the copied options point at: a client of its
	// own makes its own (sharing the push processor fails to register).
	template.PushNotificationProcessor, template.ClientSideCacheConfig = nil, nil
	d = redis.NewClient(&template)
	if c.onDirect != nil {
		c.onDirect(d)
	}
	if c.directs == nil {
		c.directs = make(map[string]*redis.Client)
	}
	c.directs[addr] = d
	return d, nil
}

// closeDirects closes the clients direct made.
func (c *Conn) closeDirects() {
	c.mu.Lock()
	ds := c.directs
	c.directs = nil
	c.mu.Unlock()
	for _, d := range ds {
		_ = d.Close()
	}
}

// checkTimeout bounds one read on the new master (HoldsOnThen,
// QueuedOnThen), as far as go-redis lets ctx bound it.
const checkTimeout = time.Second

// HoldsOnThen reads, on the server at addr and not through the client's
// pool, whether each of fields is in name's hash, and the hash's remaining
// TTL. then receives, per field, the TTL left, 0 when the field is
// missing, or -1 when the key has no TTL; on another goroutine (one Close
// waits for), or at once once Close has begun.
func (c *Conn) HoldsOnThen(ctx context.Context, addr, name string, fields []string, then func([]time.Duration, error)) {
	c.onServer(ctx, addr, func(ctx context.Context, d *redis.Client) {
		pipe := d.Pipeline()
		has := make([]*redis.BoolCmd, len(fields))
		for i, f := range fields {
			has[i] = pipe.HExists(ctx, name, f)
		}
		ttl := pipe.PTTL(ctx, name)
		if _, err := pipe.Exec(ctx); err != nil {
			then(nil, err)
			return
		}
		left := ttl.Val() // -1: no TTL; -2: no key (then no field either)
		if left == 0 {
			left = time.Millisecond // present, expiring now
		}
		out := make([]time.Duration, len(fields))
		for i, h := range has {
			if h.Val() {
				out[i] = left
			}
		}
		then(out, nil)
	}, func(err error) { then(nil, err) })
}

// QueuedOnThen lists name's fair-lock queue on the server at addr, not
// through the client's pool; then receives it as HoldsOnThen's does.
func (c *Conn) QueuedOnThen(ctx context.Context, addr, name string, then func([]string, error)) {
	c.onServer(ctx, addr, func(ctx context.Context, d *redis.Client) {
		then(d.LRange(ctx, FairQueue(name), 0, -1).Result())
	}, func(err error) { then(nil, err) })
}

// onServer runs fn with the direct client of addr on a goroutine Close
// waits for, within checkTimeout; failed gets the error when there is no
// such client, or Close has begun.
func (c *Conn) onServer(ctx context.Context, addr string, fn func(context.Context, *redis.Client), failed func(error)) {
	if !c.spawn(func() {
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		defer cancel()
		d, err := c.direct(ctx, addr)
		if err != nil {
			failed(err)
			return
		}
		fn(ctx, d)
	}) {
		failed(ErrClosed)
	}
}

// PoolReaches reports whether the client's command connections reach the
// server at addr: a command sent through them reads the same run_id as one
// sent to addr directly. ctx bounds the call.
func (c *Conn) PoolReaches(ctx context.Context, addr string) (bool, error) {
	return Guard(ctx, c, func(ctx context.Context) (bool, error) {
		if cc, ok := c.rdb.(*redis.ClusterClient); ok {
			node, err := cc.MasterForKey(ctx, "")
			return err == nil && sameServer(node.Options().Addr, addr), err
		}
		d, err := c.direct(ctx, addr)
		if err != nil {
			return false, err
		}
		want, err := runID(d.Info(ctx, "server"))
		if err != nil {
			return false, err
		}
		got, err := runID(c.rdb.Info(ctx, "server"))
		if err != nil {
			return false, err
		}
		return got == want, nil
	})
}

// runID is the run_id an INFO server reply carries.
func runID(cmd *redis.StringCmd) (string, error) {
	s, err := cmd.Result()
	if err != nil {
		return "", err
	}
	if id := infoField(s, "run_id"); id != "" {
		return id, nil
	}
	return "", errors.New("INFO server has no run_id")
}

// sameServer reports whether two addresses name one server. go-redis's
// Cluster client drops a loopback host from the addresses it is given
// (":6379" for "127.0.0.1:6379"), so an empty host matches a loopback one.
func sameServer(a, b string) bool {
	if a == b {
		return true
	}
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb {
		return false
	}
	return ha == hb || loopback(ha) && loopback(hb)
}

// loopback reports whether host is empty or a loopback name or address.
func loopback(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
