package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterBusOffset: a node's cluster bus listens on its port + 10000.
	clusterBusOffset = 10000
	// clusterNodeTimeout is --cluster-node-timeout: a master stopped for
	// less than this is not marked failed by the others.
	clusterNodeTimeout = 5 * time.Second
	// clusterReadyLimit bounds the wait for cluster_state:ok everywhere.
	clusterReadyLimit = 20 * time.Second
	// clusterNodeAttempts is how many ports a node start tries.
	clusterNodeAttempts = 10
)

// cluster is a local Redis Cluster of masters only (no replicas), started
// by this tool: one redis-server per master, each on a free loopback port
// whose bus port is free too, slots split into equal ranges in node order.
// Only the processes it started are ever signalled.
type cluster struct {
	nodes  []*server
	slots  [][2]int // nodes[i] serves slots[i][0]..slots[i][1]
	dir    string   // the nodes' cluster config files
	frozen []bool   // nodes[i] was sent SIGSTOP and not yet SIGCONT
}

// startCluster starts masters cluster-enabled redis-servers from bin, gives
// each an equal range of slots (CLUSTER ADDSLOTSRANGE), joins them (CLUSTER
// MEET) and waits until every node reports cluster_state:ok and sees every
// master. On an error every node started so far is stopped.
func startCluster(bin redisExe, masters int) (_ *cluster, err error) {
	dir, err := os.MkdirTemp("", "lockactor-bench-cluster-")
	if err != nil {
		return nil, fmt.Errorf("cluster dir: %w", err)
	}
	c := &cluster{dir: dir, frozen: make([]bool, masters)}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	for i := range masters {
		s, err := startClusterNode(bin, dir, i)
		if err != nil {
			return nil, fmt.Errorf("cluster node %d: %w", i, err)
		}
		c.nodes = append(c.nodes, s)
		lo := i * clusterSlots / masters
		hi := (i+1)*clusterSlots/masters - 1
		c.slots = append(c.slots, [2]int{lo, hi})
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyLimit)
	defer cancel()
	for i, s := range c.nodes {
		if err := s.admin.ClusterAddSlotsRange(ctx, c.slots[i][0], c.slots[i][1]).Err(); err != nil {
			return nil, fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE %d %d: %w", s.addr, c.slots[i][0], c.slots[i][1], err)
		}
	}
	for _, s := range c.nodes[1:] {
		host, port, _ := net.SplitHostPort(s.addr)
		if err := c.nodes[0].admin.ClusterMeet(ctx, host, port).Err(); err != nil {
			return nil, fmt.Errorf("%s: CLUSTER MEET %s: %w", c.nodes[0].addr, s.addr, err)
		}
	}
	if err := c.waitOK(ctx); err != nil {
		return nil, fmt.Errorf("cluster %v: %w", c.addrs(), err)
	}
	return c, nil
}

// startClusterNode starts node i of a cluster in dir: a port whose bus port
// is free as well, its own cluster config file per attempt (a failed start
// may have written one). Persistence is off (tryStartOn's --save ""
// --appendonly no).
func startClusterNode(bin redisExe, dir string, i int) (*server, error) {
	var lastErr error
	for attempt := range clusterNodeAttempts {
		port, err := clusterFreePort()
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, fmt.Sprintf("nodes-%d-%d.conf", i, attempt))
		s, err := tryStartOn(bin, port, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", conf,
			"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
		})
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("start %s: %w", bin.path, lastErr)
}

// clusterFreePort is a free loopback port whose bus port (+10000) is free
// too. Either may be taken before redis-server binds it; the start then
// fails and startClusterNode tries another.
func clusterFreePort() (int, error) {
	for range 100 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		if port+clusterBusOffset > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+clusterBusOffset)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, errors.New("no free port with a free bus port")
}

// waitOK polls every node until all report cluster_state:ok, every slot
// ok, and as many known nodes and connected masters serving slots as there
// are nodes, or ctx ends.
func (c *cluster) waitOK(ctx context.Context) error {
	n := strconv.Itoa(len(c.nodes))
	want := map[string]string{"cluster_state": "ok", "cluster_slots_ok": strconv.Itoa(clusterSlots),
		"cluster_known_nodes": n, "cluster_size": n}
	for {
		err := func() error {
			for _, s := range c.nodes {
				info, err := s.admin.ClusterInfo(ctx).Result()
				if err != nil {
					return fmt.Errorf("%s: CLUSTER INFO: %w", s.addr, err)
				}
				for k, v := range want {
					if got := infoField(info, k); got != v {
						return fmt.Errorf("%s: %s:%s, want %s", s.addr, k, got, v)
					}
				}
				nodes, err := s.admin.ClusterNodes(ctx).Result()
				if err != nil {
					return fmt.Errorf("%s: CLUSTER NODES: %w", s.addr, err)
				}
				if m := connectedMasters(nodes); m != len(c.nodes) {
					return fmt.Errorf("%s sees %d connected masters, want %d", s.addr, m, len(c.nodes))
				}
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ok in time: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// connectedMasters counts the lines of a CLUSTER NODES reply that are
// masters, not failing, with the link connected.
func connectedMasters(nodes string) int {
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[7] != "connected" {
			continue
		}
		flags := "," + f[2] + ","
		if strings.Contains(flags, ",master,") && !strings.Contains(flags, "fail") {
			n++
		}
	}
	return n
}

// addrs are the nodes' addresses, in node order.
func (c *cluster) addrs() []string {
	var out []string
	for _, s := range c.nodes {
		out = append(out, s.addr)
	}
	return out
}

// masterOf is the index of the node that serves slot, -1 if none.
func (c *cluster) masterOf(slot int) int {
	for i, r := range c.slots {
		if slot >= r[0] && slot <= r[1] {
			return i
		}
	}
	return -1
}

// namesPerMaster finds n names per master: "<prefix>{<tag><i>}" for i = 0,
// 1, ..., each placed by CLUSTER KEYSLOT, until every master has n.
func (c *cluster) namesPerMaster(ctx context.Context, prefix, tag string, n int) ([][]string, error) {
	out := make([][]string, len(c.nodes))
	full := 0
	for i := 0; full < len(c.nodes); i++ {
		if i > 100*n*len(c.nodes)+1000 {
			return nil, fmt.Errorf("found only %d of %d masters' names after %d tries", full, len(c.nodes), i)
		}
		name := fmt.Sprintf("%s{%s%d}", prefix, tag, i)
		slot, err := c.nodes[0].admin.ClusterKeySlot(ctx, name).Result()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER KEYSLOT %s: %w", name, err)
		}
		m := c.masterOf(int(slot))
		if m < 0 || len(out[m]) >= n {
			continue
		}
		out[m] = append(out[m], name)
		if len(out[m]) == n {
			full++
		}
	}
	return out, nil
}

// freeze stops node i (SIGSTOP): it keeps its sockets open and answers
// nothing until thaw.
func (c *cluster) freeze(i int) error {
	if err := syscall.Kill(c.nodes[i].cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %s: %w", c.nodes[i].addr, err)
	}
	c.frozen[i] = true
	return nil
}

// thaw resumes node i (SIGCONT) if freeze stopped it.
func (c *cluster) thaw(i int) error {
	if !c.frozen[i] {
		return nil
	}
	if err := syscall.Kill(c.nodes[i].cmd.Process.Pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %s: %w", c.nodes[i].addr, err)
	}
	c.frozen[i] = false
	return nil
}

// stop resumes any frozen node (a stopped process would hold SIGTERM until
// SIGCONT), stops every node and removes the config directory.
func (c *cluster) stop() {
	for i := range c.nodes {
		_ = c.thaw(i)
	}
	for _, s := range c.nodes {
		s.stop()
	}
	_ = os.RemoveAll(c.dir)
}
