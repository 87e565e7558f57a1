package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
)

// node is one independent Redis master of a RedLock and the lockactor
// Client on it.
type node struct {
	addr   string
	rdb    *redis.Client
	mini   *miniredis.Miniredis // nil for a real server
	cut    *cutHook             // takes a real server down for this demo only
	client *lockactor.Client
	down   bool
}

// openNodes starts n embedded miniredis nodes, or connects to the servers in
// urls when there are any (each must answer PING). Every go-redis client
// fails fast against a dead node, as a RedLock user would set it: no retries,
// one dial attempt.
func openNodes(ctx context.Context, urls []*redis.Options, n int, opts ...lockactor.Option) ([]*node, error) {
	var nodes []*node
	fail := func(err error) ([]*node, error) {
		closeNodes(nodes)
		return nil, err
	}
	if urls != nil {
		n = len(urls)
	}
	for i := range n {
		nd := &node{cut: new(cutHook)}
		var o redis.Options
		if urls == nil {
			m, err := startMiniredis()
			if err != nil {
				return fail(err)
			}
			nd.mini, o.Addr = m, m.Addr()
		} else {
			if err := ping(ctx, urls[i]); err != nil {
				return fail(err)
			}
			o = *urls[i]
		}
		o.MaxRetries, o.DialerRetries = -1, 1
		nd.addr, nd.rdb = o.Addr, redis.NewClient(&o)
		nd.rdb.AddHook(nd.cut)
		nodes = append(nodes, nd)
		c, err := lockactor.New(nd.rdb, opts...)
		if err != nil {
			return fail(fmt.Errorf("lockactor.New: %w", err))
		}
		nd.client = c
	}
	return nodes, nil
}

// closeNodes closes every node's Client, go-redis client and embedded server.
func closeNodes(nodes []*node) {
	for _, nd := range nodes {
		if nd.client != nil {
			_ = nd.client.Close()
		}
		_ = nd.rdb.Close()
		if nd.mini != nil {
			nd.mini.Close()
		}
	}
}

// takeDown stops an embedded node; a real one is cut off from this process
// (every command and dial fails), as it is not the demo's to stop.
func (nd *node) takeDown() {
	nd.down = true
	if nd.mini != nil {
		nd.mini.Close()
		return
	}
	nd.cut.cut.Store(true)
}

// downVerb says what takeDown does to the node.
func (nd *node) downVerb() string {
	if nd.mini != nil {
		return "stopped"
	}
	return "cut off from this process"
}

// holds reports whether the node is up and has key.
func (nd *node) holds(ctx context.Context, key string) bool {
	return !nd.down && nd.rdb.Exists(ctx, key).Val() == 1
}

// describeNodes says what the nodes are, for the narrative.
func describeNodes(nodes []*node) string {
	kind := "embedded miniredis"
	if nodes[0].mini == nil {
		kind = "redis"
	}
	addrs := make([]string, len(nodes))
	for i, nd := range nodes {
		addrs[i] = nd.addr
	}
	return fmt.Sprintf("%d %s nodes (%s)", len(nodes), kind, strings.Join(addrs, ", "))
}

// holding counts the nodes that are up and have key.
func holding(ctx context.Context, nodes []*node, key string) int {
	n := 0
	for _, nd := range nodes {
		if nd.holds(ctx, key) {
			n++
		}
	}
	return n
}

// clearTimeout bounds the wait for a refused RedLock's nodes to be released.
const clearTimeout = 2 * time.Second

// cleared waits until no node holds key, or clearTimeout; it returns how
// long it waited and how many nodes still hold key.
func cleared(ctx context.Context, nodes []*node, key string) (time.Duration, int) {
	start := time.Now()
	for {
		n := holding(ctx, nodes, key)
		if n == 0 || time.Since(start) > clearTimeout || ctx.Err() != nil {
			return time.Since(start), n
		}
		sleep(ctx, 5*time.Millisecond)
	}
}

// noQuorumCauses sums up an ErrNoQuorum, which lists one line per failed
// node: "ErrNoQuorum, 3 nodes failed: connection refused".
func noQuorumCauses(err error) string {
	lines := strings.Split(err.Error(), "\n")
	var causes []string
	for _, l := range lines {
		c := l[strings.LastIndex(l, ": ")+2:]
		if !slices.Contains(causes, c) {
			causes = append(causes, c)
		}
	}
	return fmt.Sprintf("ErrNoQuorum, %d nodes failed: %s", len(lines), strings.Join(causes, "; "))
}
