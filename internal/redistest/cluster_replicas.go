package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

const (
	clusterFailoverTimeout = 15 * time.Second // CLUSTER FAILOVER until roles, slots and links settle
	clusterMigrateTimeout  = 5000             // MIGRATE timeout, in ms
	clusterMigrateBatch    = 100              // keys per CLUSTER GETKEYSINSLOT / MIGRATE
)

// StartClusterReplicas starts a cluster of masters (>= 3) with one replica
// each, so 2*masters nodes, joined by `redis-cli --cluster create
// --cluster-replicas 1`. Every node runs as by StartCluster, plus extraArgs
// (e.g. `--rename-command SPUBLISH "" --rename-command SSUBSCRIBE ""` for a
// cluster that behaves like Redis 6 for sharded pub/sub). It waits (at most
// 10s each) until every node reports cluster_state:ok and every replica
// reports master_link_status:up, and registers tb.Cleanup to stop all nodes.
// Nodes returns all nodes, masters and replicas; use NodeFor (MasterFor) and
// ReplicaOf for the current roles, which Failover and a killed master change.
// Without redis-server or redis-cli it fails or skips like StartCluster.
func StartClusterReplicas(tb testing.TB, masters int, extraArgs ...string) *Cluster {
	tb.Helper()
	if masters < 3 {
		tb.Fatalf("redistest: StartClusterReplicas(%d): a Redis Cluster needs at least 3 masters", masters)
		return nil
	}
	bin, cli, ok := clusterTools(tb)
	if !ok {
		return nil
	}
	dir := tb.TempDir()
	start := time.Now()
	c, err := startCluster(bin, cli, dir, masters, 1, extraArgs)
	if err != nil {
		tb.Fatalf("redistest: StartClusterReplicas(%d): %v", masters, err)
		return nil
	}
	tb.Cleanup(c.Stop)
	tb.Logf("redistest: cluster of %d masters + %d replicas ready in %v: %v", masters, masters, time.Since(start).Round(time.Millisecond), c.Addrs())
	return c
}

// MasterFor is NodeFor: the master that currently owns key's slot, or nil.
func (c *Cluster) MasterFor(key string) *Server { return c.NodeFor(key) }

// Masters returns the nodes that the first answering node's CLUSTER NODES
// lists as masters serving at least one slot and not failed, in Nodes order,
// or nil if no node answers.
func (c *Cluster) Masters() []*Server {
	for _, s := range c.nodes {
		if !s.answering() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
		nodes, err := clusterNodes(ctx, s.Addr())
		cancel()
		if err != nil {
			continue
		}
		serving := map[*Server]bool{}
		for _, n := range nodes {
			if n.has("master") && !n.has("fail") && n.slots > 0 {
				serving[c.byAddr(n.addr)] = true
			}
		}
		var out []*Server
		for _, s := range c.nodes {
			if serving[s] {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// ReplicaOf returns a node that master's CLUSTER NODES lists as its replica
// and not as failed, or nil if there is none (or master does not answer).
func (c *Cluster) ReplicaOf(master *Server) *Server {
	ctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
	defer cancel()
	nodes, err := clusterNodes(ctx, master.Addr())
	if err != nil {
		return nil
	}
	self := nodes.self()
	for _, n := range nodes {
		if self != nil && n.masterID == self.id && !n.has("fail") && !n.has("fail?") {
			if s := c.byAddr(n.addr); s != nil {
				return s
			}
		}
	}
	return nil
}

// Failover sends CLUSTER FAILOVER (the graceful, coordinated kind) to a
// replica of the master of key's slot and waits (at most 15s) until that
// replica reports role:master, every answering node names it as the slot's
// owner and the old master as its replica, the cluster is ok and every
// replica, the old master included, is linked. It returns the new master and fails the test if any of that does
// not happen.
func (c *Cluster) Failover(tb testing.TB, key string) *Server {
	tb.Helper()
	m := c.NodeFor(key)
	if m == nil {
		tb.Fatalf("redistest: Failover(%q): no node names the slot's master", key)
		return nil
	}
	r := c.ReplicaOf(m)
	if r == nil {
		tb.Fatalf("redistest: Failover(%q): master %s has no replica", key, m.Addr())
		return nil
	}
	start := time.Now()
	rc := queryClient(r.Addr())
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
	err := rc.ClusterFailover(ctx).Err()
	cancel()
	if err != nil {
		tb.Fatalf("redistest: CLUSTER FAILOVER on %s (replica of %s): %v", r.Addr(), m.Addr(), err)
		return nil
	}
	err = poll("replica "+r.Addr()+" takes over "+key, clusterFailoverTimeout, clusterPollInterval, func(ctx context.Context) error {
		repl, err := info(ctx, r.Addr(), "replication")
		if err != nil {
			return err
		}
		if repl["role"] != "master" {
			return fmt.Errorf("%s role:%s", r.Addr(), repl["role"])
		}
		if err := c.agreeOwner(ctx, key, r); err != nil {
			return err
		}
		return c.agreeReplica(ctx, m, r)
	})
	if err == nil {
		err = c.waitOK(clusterFailoverTimeout)
	}
	if err == nil {
		err = c.waitLinked(clusterFailoverTimeout, -1)
	}
	if err != nil {
		tb.Fatalf("redistest: Failover(%q) from %s to %s: %v", key, m.Addr(), r.Addr(), err)
		return nil
	}
	tb.Logf("redistest: cluster failover of %q from %s to %s in %v", key, m.Addr(), r.Addr(), time.Since(start).Round(time.Millisecond))
	return r
}

// agreeOwner checks that every answering node maps key's slot to want.
func (c *Cluster) agreeOwner(ctx context.Context, key string, want *Server) error {
	for _, s := range c.nodes {
		if !s.answering() {
			continue
		}
		got, err := c.nodeForVia(ctx, s.Addr(), key)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr(), err)
		}
		if got != want {
			return fmt.Errorf("%s says %q is on %s, want %s", s.Addr(), key, got.Addr(), want.Addr())
		}
	}
	return nil
}

// agreeReplica checks that every answering node's CLUSTER NODES lists
// replica as a replica of master.
func (c *Cluster) agreeReplica(ctx context.Context, replica, master *Server) error {
	for _, s := range c.nodes {
		if !s.answering() {
			continue
		}
		nodes, err := clusterNodes(ctx, s.Addr())
		if err != nil {
			return err
		}
		var masterID string
		for _, n := range nodes {
			if c.byAddr(n.addr) == master {
				masterID = n.id
			}
		}
		ok := false
		for _, n := range nodes {
			if c.byAddr(n.addr) == replica {
				ok = masterID != "" && n.masterID == masterID && n.has("slave")
			}
		}
		if !ok {
			return fmt.Errorf("%s does not list %s as a replica of %s yet", s.Addr(), replica.Addr(), master.Addr())
		}
	}
	return nil
}

// waitLinked polls INFO replication on every answering node until each
// replica reports master_link_status:up with no sync in progress, every
// answering node's CLUSTER NODES lists it as a replica of that master and,
// if wantReplicas >= 0, exactly that many nodes are replicas.
func (c *Cluster) waitLinked(timeout time.Duration, wantReplicas int) error {
	return poll("replicas linked", timeout, clusterPollInterval, func(ctx context.Context) error {
		replicas := 0
		var pairs [][2]*Server // replica, master
		for _, s := range c.nodes {
			if !s.answering() {
				continue
			}
			repl, err := info(ctx, s.Addr(), "replication")
			if err != nil {
				return err
			}
			if repl["role"] != "slave" {
				continue
			}
			replicas++
			if repl["master_link_status"] != "up" || repl["master_sync_in_progress"] != "0" {
				return fmt.Errorf("replica %s: master_link_status:%s master_sync_in_progress:%s",
					s.Addr(), repl["master_link_status"], repl["master_sync_in_progress"])
			}
			m := c.byAddr("127.0.0.1:" + repl["master_port"])
			if m == nil {
				return fmt.Errorf("replica %s: master_port:%s is not a node of this cluster", s.Addr(), repl["master_port"])
			}
			pairs = append(pairs, [2]*Server{s, m})
		}
		for _, p := range pairs {
			if err := c.agreeReplica(ctx, p[0], p[1]); err != nil {
				return err
			}
		}
		if wantReplicas >= 0 && replicas != wantReplicas {
			return fmt.Errorf("%d replicas, want %d", replicas, wantReplicas)
		}
		return nil
	})
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, masterID string
	flags              []string
	slots              int // slot ranges and single slots listed (not slot counts)
}

func (n clusterNode) has(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

type clusterNodeList []clusterNode

// self returns the line flagged myself, or nil.
func (l clusterNodeList) self() *clusterNode {
	for i := range l {
		if l[i].has("myself") {
			return &l[i]
		}
	}
	return nil
}

// clusterNodes runs CLUSTER NODES on a and parses its reply.
func clusterNodes(ctx context.Context, a string) (clusterNodeList, error) {
	rc := queryClient(a)
	defer rc.Close()
	s, err := rc.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", a, err)
	}
	var l clusterNodeList
	for line := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("%s: CLUSTER NODES line %q", a, line)
		}
		hostport, _, _ := strings.Cut(f[1], "@") // ip:port@cport[,hostname]
		l = append(l, clusterNode{id: f[0], addr: hostport, flags: strings.Split(f[2], ","), masterID: f[3], slots: len(f) - 8})
	}
	return l, nil
}

// myID returns a node's own cluster node ID.
func myID(ctx context.Context, a string) (string, error) {
	rc := queryClient(a)
	defer rc.Close()
	id, err := rc.ClusterMyID(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("%s: CLUSTER MYID: %w", a, err)
	}
	return id, nil
}

// keySlot returns CLUSTER KEYSLOT key as answered by a.
func keySlot(ctx context.Context, a, key string) (int, error) {
	rc := queryClient(a)
	defer rc.Close()
	slot, err := rc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("%s: CLUSTER KEYSLOT: %w", a, err)
	}
	return int(slot), nil
}

// errNoMaster: no node could name the owner of a slot.
var errNoMaster = errors.New("no node names the slot's master")
