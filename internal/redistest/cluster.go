package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterBusOffset     = 10000            // a node's cluster bus listens on port+10000
	clusterPortAttempts  = 200              // freePort draws until port and port+10000 are free
	clusterNodeTimeout   = "2000"           // --cluster-node-timeout, in ms
	clusterCreateTimeout = 30 * time.Second // redis-cli --cluster create
	clusterReadyTimeout  = 10 * time.Second // until every node reports cluster_state:ok
	clusterPollInterval  = 50 * time.Millisecond
	clusterQueryTimeout  = 500 * time.Millisecond // per CLUSTER command in polls and NodeFor
	sharedClusterSize    = 3
)

// Cluster is a local Redis Cluster started by StartCluster or SharedCluster
// (masters only) or by StartClusterReplicas (masters with replicas). Every node is a *Server, so the fault
// methods (Kill, Pause, Resume, Restart) work on nodes as on standalone
// servers. A node keeps its cluster config file (nodes-<port>.conf) across
// Kill and Restart, so a restarted node rejoins with the same node ID and
// slots (but no data); call WaitOK afterwards. A master paused for longer than
// the 2s node timeout is marked failed by the others, and as there are no
// replicas its slots stay uncovered (cluster_state:fail) until Resume; with
// replicas (StartClusterReplicas) one of them takes over instead.
type Cluster struct {
	nodes    []*Server
	replicas int    // replicas per master at creation (StartClusterReplicas)
	dir      string // holds every node's log and nodes-<port>.conf
	ownDir   bool   // dir is ours to remove in Stop (SharedCluster)
}

// StartCluster starts n (>= 3) masters with cluster-enabled yes on free
// 127.0.0.1 ports whose bus ports (port+10000) are free too, joins them with
// `redis-cli --cluster create <addrs> --cluster-replicas 0 --cluster-yes`,
// waits (at most 10s) until every node reports cluster_state:ok, all 16384
// slots ok and n known nodes, and registers tb.Cleanup to stop all nodes.
//
// Each node runs with Start's arguments (`--save "" --appendonly no`, its
// own process group, Pdeathsig) plus --cluster-enabled yes
// --cluster-config-file <dir>/nodes-<port>.conf --cluster-node-timeout 2000,
// a dump-<port>.rdb file name and replication settings for a fast full sync
// (as for StartReplicated, but the default hz), then extraArgs (e.g.
// `--rename-command SPUBLISH "" --rename-command SSUBSCRIBE ""` for a
// stand-in for a Redis 6 cluster, which has no sharded pub/sub).
// Forming a cluster takes a second or two; see SharedCluster to start one
// per test package.
//
// There is no miniredis fallback: without redis-server or redis-cli on PATH,
// StartCluster fails the test when LOCKACTOR_REQUIRE_REDIS=1 and skips it
// otherwise.
func StartCluster(tb testing.TB, n int, extraArgs ...string) *Cluster {
	tb.Helper()
	if n < 3 {
		tb.Fatalf("redistest: StartCluster(%d): a Redis Cluster needs at least 3 masters", n)
		return nil
	}
	bin, cli, ok := clusterTools(tb)
	if !ok {
		return nil
	}
	dir := tb.TempDir() // before tb.Cleanup(c.Stop), so the nodes stop before it is removed
	start := time.Now()
	c, err := startCluster(bin, cli, dir, n, 0, extraArgs)
	if err != nil {
		tb.Fatalf("redistest: StartCluster(%d): %v", n, err)
		return nil
	}
	tb.Cleanup(c.Stop)
	tb.Logf("redistest: cluster of %d masters ready in %v: %v", n, time.Since(start).Round(time.Millisecond), c.Addrs())
	return c
}

// shared is the package's SharedCluster.
var shared struct {
	mu  sync.Mutex
	c   *Cluster
	err error // a failed start, reported to every later caller
}

// SharedCluster returns a 3-master cluster started (as by StartCluster) on
// first use and kept for the whole test package, since forming a cluster
// takes seconds. It registers no cleanup on tb: the nodes run until
// StopShared, which the package's TestMain must call after m.Run and before
// any goroutine leak check:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		redistest.StopShared()
//		if code == 0 {
//			if err := goleak.Find(); err != nil {
//				fmt.Fprintln(os.Stderr, err)
//				code = 1
//			}
//		}
//		os.Exit(code)
//	}
//
// Tests sharing it should use their own keys (hash tags) and leave the nodes
// running: a test that kills or pauses nodes should use StartCluster, or
// restore the nodes (Restart or Resume, then WaitOK) before it ends. If the
// start fails, this and every later call fail the test until StopShared.
// Without redis-server or redis-cli on PATH it skips or fails like
// StartCluster.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	bin, cli, ok := clusterTools(tb)
	if !ok {
		return nil
	}
	shared.mu.Lock()
	defer shared.mu.Unlock() // also on Fatalf, which exits the goroutine
	if shared.c != nil {
		return shared.c
	}
	if shared.err == nil {
		shared.c, shared.err = startShared(bin, cli)
	}
	if shared.err != nil {
		tb.Fatalf("redistest: SharedCluster: %v", shared.err)
		return nil
	}
	return shared.c
}

func startShared(bin, cli string) (*Cluster, error) {
	// Not tb.TempDir(): that is removed when the first caller's test ends.
	dir, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		return nil, err
	}
	c, err := startCluster(bin, cli, dir, sharedClusterSize, 0, nil)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c.ownDir = true
	return c, nil
}

// StopShared stops the nodes of the SharedCluster, if one was started, and
// removes its directory. It is idempotent; a later SharedCluster starts a new
// cluster.
func StopShared() {
	shared.mu.Lock()
	c := shared.c
	shared.c, shared.err = nil, nil
	shared.mu.Unlock()
	if c != nil {
		c.Stop()
	}
}

// Addrs returns the nodes' "127.0.0.1:port" addresses, in Nodes order.
func (c *Cluster) Addrs() []string { return addrsOf(c.nodes) }

// addrsOf lists the servers' "127.0.0.1:port" addresses, in order.
func addrsOf(servers []*Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Nodes returns the nodes (with StartClusterReplicas, masters and replicas
// alike), e.g. for Kill, Pause, Resume and Restart. The
// slice is a copy; the *Server values are the cluster's own.
func (c *Cluster) Nodes() []*Server { return append([]*Server(nil), c.nodes...) }

// Client returns a go-redis ClusterClient seeded with all Addrs, closed in
// tb.Cleanup.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	return c.ClientWith(tb, nil)
}

// ClientWith is Client with options: configure, if not nil, may change any
// field of the options (Addrs is preset) before the client is created.
func (c *Cluster) ClientWith(tb testing.TB, configure func(*redis.ClusterOptions)) *redis.ClusterClient {
	tb.Helper()
	opt := &redis.ClusterOptions{Addrs: c.Addrs()}
	if configure != nil {
		configure(opt)
	}
	cc := redis.NewClusterClient(opt)
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// NodeFor returns the master that owns key's slot, as answered by CLUSTER
// KEYSLOT and CLUSTER SLOTS on the first node that is running and not paused.
// It returns nil if no node answers or the slot's owner is not one of Nodes.
func (c *Cluster) NodeFor(key string) *Server {
	ctx := context.Background()
	for _, s := range c.nodes {
		if !s.answering() {
			continue
		}
		if n, err := c.nodeForVia(ctx, s.Addr(), key); err == nil {
			return n
		}
	}
	return nil
}

func (c *Cluster) nodeForVia(ctx context.Context, via, key string) (*Server, error) {
	rc := queryClient(via)
	defer rc.Close()
	slot, err := rc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	// CLUSTER SLOTS, deprecated for CLUSTER SHARDS, is what go-redis's
	// ClusterClient builds its routing from (v9.23 osscluster.go): the
	// master named here is the one the Clients under test send the key to.
	//lint:ignore SA1019 the same slot map go-redis routes by, on purpose.
	ranges, err := rc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	for _, r := range ranges {
		if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
			if n := c.byAddr(r.Nodes[0].Addr); n != nil { // Nodes[0] is the master
				return n, nil
			}
			return nil, fmt.Errorf("slot %d is served by %s, not a node of this cluster", slot, r.Nodes[0].Addr)
		}
	}
	return nil, fmt.Errorf("slot %d is not assigned", slot)
}

// byAddr finds a node by the port of an "ip:port" address (the announced IP
// need not be spelled 127.0.0.1).
func (c *Cluster) byAddr(a string) *Server {
	_, p, err := net.SplitHostPort(a)
	if err != nil {
		return nil
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil
	}
	for _, s := range c.nodes {
		if s.Port() == port {
			return s
		}
	}
	return nil
}

// WaitOK waits (at most 10s) until every node reports cluster_state:ok, all
// 16384 slots ok and all nodes known, e.g. after Restart or Resume of a node,
// and fails the test otherwise.
func (c *Cluster) WaitOK(tb testing.TB) {
	tb.Helper()
	if err := c.waitOK(clusterReadyTimeout); err != nil {
		tb.Fatalf("redistest: cluster %v: %v", c.Addrs(), err)
	}
}

// Stop stops all nodes (each as by Server.Stop, concurrently) and returns
// once they have exited. It is idempotent and is what StartCluster's
// tb.Cleanup calls.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, s := range c.nodes {
		wg.Go(s.Stop)
	}
	wg.Wait()
	if c.ownDir {
		_ = os.RemoveAll(c.dir)
	}
}

// clusterTools finds redis-server and redis-cli, or fails or skips the test
// as needTools does; ok is false if tb's Fatalf or Skipf returned.
func clusterTools(tb testing.TB) (bin, cli string, ok bool) {
	tb.Helper()
	paths, ok := needTools(tb, "a Redis Cluster", "redis-server", "redis-cli")
	if !ok {
		return "", "", false
	}
	return paths[0], paths[1], true
}

// startCluster starts masters*(1+replicas) nodes in dir, each with
// extraArgs, joins them with redis-cli (--cluster-replicas replicas) and
// waits until the cluster is ok and every replica is linked. On error every
// node it started has been stopped.
func startCluster(bin, cli, dir string, masters, replicas int, extraArgs []string) (*Cluster, error) {
	c := &Cluster{dir: dir, replicas: replicas}
	for range masters * (1 + replicas) {
		s, err := startClusterNode(bin, dir, extraArgs)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.create(cli); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.waitOK(clusterReadyTimeout); err != nil {
		c.Stop()
		return nil, fmt.Errorf("cluster %v: %w", c.Addrs(), err)
	}
	if err := c.waitLinked(clusterReadyTimeout, masters*replicas); err != nil {
		c.Stop()
		return nil, fmt.Errorf("cluster %v: %w", c.Addrs(), err)
	}
	return c, nil
}

// startClusterNode launches one cluster-enabled redis-server (startNode) on
// a port whose bus port is free too, with extraArgs after the cluster ones.
// No tb.Cleanup is registered: the Cluster stops its nodes.
func startClusterNode(bin, dir string, extraArgs []string) (*Server, error) {
	return startNode(bin, dir, nodeSpec{
		name: "redis",
		port: clusterFreePort,
		args: func(port int) []string {
			return append([]string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)),
				"--cluster-node-timeout", clusterNodeTimeout,
				// Replicas (StartClusterReplicas) sync as a Replicated pair
				// does (replArgs), through a file of their own: the nodes
				// share one directory.
				"--dbfilename", fmt.Sprintf("dump-%d.rdb", port),
			}, append(append([]string(nil), replArgs...), extraArgs...)...)
		},
	})
}

// clusterFreePort returns a free port (freePort) whose cluster bus port,
// port+10000, is free as well. Both can be taken before redis-server binds
// them; then the launch fails and the caller retries.
func clusterFreePort() (int, error) {
	for range clusterPortAttempts {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		if port+clusterBusOffset > 65535 {
			continue
		}
		l, err := net.Listen("tcp", addr(port+clusterBusOffset))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port with a free bus port (+%d) in %d tries", clusterBusOffset, clusterPortAttempts)
}

// create runs `redis-cli --cluster create` on the nodes, its output going to
// a file in c.dir (no copying goroutines).
func (c *Cluster) create(cli string) error {
	logPath := filepath.Join(c.dir, "redis-cli-cluster-create.log")
	out, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("redis-cli %s: %v\n--- %s ---\n%s", strings.Join(args, " "), err, logPath, tail(logPath))
	}
	return nil
}

// waitOK polls CLUSTER INFO on every node until all report cluster_state:ok,
// cluster_slots_ok:16384 and cluster_known_nodes equal to the node count.
func (c *Cluster) waitOK(timeout time.Duration) error {
	clients := make([]*redis.Client, len(c.nodes))
	for i, s := range c.nodes {
		clients[i] = queryClient(s.Addr())
		defer clients[i].Close()
	}
	want := map[string]string{
		"cluster_state":       "ok",
		"cluster_slots_ok":    "16384",
		"cluster_known_nodes": strconv.Itoa(len(c.nodes)),
	}
	deadline := time.Now().Add(timeout)
	for {
		err := func() error {
			for i, rc := range clients {
				info, err := rc.ClusterInfo(context.Background()).Result()
				if err != nil {
					return fmt.Errorf("%s: CLUSTER INFO: %w", c.nodes[i].Addr(), err)
				}
				got := parseInfo(info)
				for k, v := range want {
					if got[k] != v {
						return fmt.Errorf("%s: %s:%s, want %s", c.nodes[i].Addr(), k, got[k], v)
					}
				}
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ok after %v: %w", timeout, err)
		}
		time.Sleep(clusterPollInterval)
	}
}

// answering reports whether the node's process is running and not paused.
func (s *Server) answering() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.p.exited() && !s.paused
}

// queryClient is a plain client for one node with short timeouts and no
// retries, for the fixture's own CLUSTER queries.
func queryClient(a string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         a,
		MaxRetries:   -1,
		PoolSize:     1,
		DialTimeout:  clusterQueryTimeout,
		ReadTimeout:  clusterQueryTimeout,
		WriteTimeout: clusterQueryTimeout,
	})
}

// parseInfo splits "key:value" lines of an INFO-style reply.
func parseInfo(info string) map[string]string {
	m := map[string]string{}
	for l := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			m[k] = v
		}
	}
	return m
}
