package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	sentinelMasterName  = "lockactor"
	sentinelCount       = 3
	sentinelQuorum      = 2
	sentinelDownAfter   = 1000             // sentinel down-after-milliseconds
	sentinelFOTimeout   = 5000             // sentinel failover-timeout, in ms
	sentinelReadyWait   = 15 * time.Second // StartSentinel until the sentinels know everything
	sentinelFailoverMax = 30 * time.Second // Failover, CrashFailover, WaitStable
	sentinelPoll        = 20 * time.Millisecond
)

// Sentinel is a Redis Sentinel deployment started by StartSentinel (two data
// servers: one master, one replica) or StartSentinelReplicas (a master and
// n replicas), monitored by three sentinels under MasterName with quorum 2.
// Which data server is master changes with Failover and CrashFailover;
// Master, Replica and Replicas ask the sentinels.
type Sentinel struct {
	pair      *Replicated // the first two data servers as started (Servers)
	extra     []*Server   // further replicas as started (StartSentinelReplicas)
	sentinels []*Server
}

// StartSentinel starts a master and a replica as StartReplicated does (with
// extraArgs), then three sentinels on free 127.0.0.1 ports, each with its own
// config file (sentinels rewrite it) holding `sentinel monitor <MasterName>
// 127.0.0.1 <port> 2`, down-after-milliseconds 1000, failover-timeout 5000,
// parallel-syncs 1 and resolve-hostnames no. It waits (at most 15s) until
// every sentinel reports the master, the replica with its link up and the
// two other sentinels, so SENTINEL FAILOVER does not answer NOGOODSLAVE,
// and registers tb.Cleanup to kill all five processes.
//
// Without redis-server on PATH it fails the test when
// LOCKACTOR_REQUIRE_REDIS=1 and skips it otherwise.
func StartSentinel(tb testing.TB, extraArgs ...string) *Sentinel {
	tb.Helper()
	return startSentinelTB(tb, "StartSentinel", 1, extraArgs)
}

func startSentinelTB(tb testing.TB, what string, replicas int, extraArgs []string) *Sentinel {
	tb.Helper()
	paths, ok := needTools(tb, "Redis Sentinel", "redis-server")
	if !ok {
		return nil
	}
	dir := tb.TempDir()
	start := time.Now()
	s, err := startSentinel(paths[0], dir, replicas, extraArgs)
	if err != nil {
		tb.Fatalf("redistest: %s: %v", what, err)
		return nil
	}
	tb.Cleanup(s.Stop)
	tb.Logf("redistest: sentinel deployment ready in %v: master %s, replicas %v, sentinels %v",
		time.Since(start).Round(time.Millisecond), s.pair.master.Addr(), addrsOf(s.Servers()[1:]), s.Addrs())
	return s
}

func startSentinel(bin, dir string, replicas int, extraArgs []string) (*Sentinel, error) {
	pair, err := startReplicated(bin, dir, extraArgs, nil)
	if err != nil {
		return nil, err
	}
	s := &Sentinel{pair: pair}
	if err := s.startExtraReplicas(bin, dir, replicas-1, extraArgs); err != nil {
		s.Stop()
		return nil, err
	}
	sdir := filepath.Join(dir, "sentinel")
	if err := os.Mkdir(sdir, 0o755); err != nil {
		s.Stop()
		return nil, err
	}
	for range sentinelCount {
		n, err := startNode(bin, sdir, nodeSpec{
			name: "sentinel",
			args: func(int) []string { return []string{"--sentinel"} },
			conf: func(port int) (string, error) { return writeSentinelConf(sdir, port, pair.master.Port()) },
		})
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.sentinels = append(s.sentinels, n)
	}
	if _, err := s.waitStable(sentinelReadyWait, pair.master, true); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// writeSentinelConf writes sentinel-<port>.conf in dir for a sentinel that
// monitors 127.0.0.1:masterPort, and returns its path.
func writeSentinelConf(dir string, port, masterPort int) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", port))
	conf := fmt.Sprintf(`sentinel resolve-hostnames no
sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d
sentinel down-after-milliseconds %[1]s %[4]d
sentinel failover-timeout %[1]s %[5]d
sentinel parallel-syncs %[1]s 1
`, sentinelMasterName, masterPort, sentinelQuorum, sentinelDownAfter, sentinelFOTimeout)
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// MasterName returns the name the sentinels monitor the master under.
func (s *Sentinel) MasterName() string { return sentinelMasterName }

// Addrs returns the sentinels' "127.0.0.1:port" addresses.
func (s *Sentinel) Addrs() []string { return addrsOf(s.sentinels) }

// Sentinels returns the sentinel processes, e.g. to Kill or Pause one. The
// slice is a copy.
func (s *Sentinel) Sentinels() []*Server { return append([]*Server(nil), s.sentinels...) }

// Servers returns the data servers in the order they were started, the one
// started as master first. The slice is a copy.
func (s *Sentinel) Servers() []*Server {
	return append([]*Server{s.pair.master, s.pair.replica}, s.extra...)
}

// FailoverClient returns a go-redis client made by redis.NewFailoverClient
// with MasterName and the sentinels' Addrs; configure, if not nil, may change
// any field of the options first. It is closed in tb.Cleanup.
func (s *Sentinel) FailoverClient(tb testing.TB, configure func(*redis.FailoverOptions)) *redis.Client {
	tb.Helper()
	opt := &redis.FailoverOptions{MasterName: sentinelMasterName, SentinelAddrs: s.Addrs()}
	if configure != nil {
		configure(opt)
	}
	c := redis.NewFailoverClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// FailoverClusterClient returns a go-redis client made by
// redis.NewFailoverClusterClient (a ClusterClient over the Sentinel group)
// with MasterName and the sentinels' Addrs. It is closed in tb.Cleanup.
func (s *Sentinel) FailoverClusterClient(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	c := redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: sentinelMasterName, SentinelAddrs: s.Addrs()})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Master returns the data server that the first answering sentinel names in
// SENTINEL GET-MASTER-ADDR-BY-NAME, or nil if none answers.
func (s *Sentinel) Master() *Server {
	for _, n := range s.sentinels {
		if !n.answering() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
		m, err := s.masterVia(ctx, n)
		cancel()
		if err == nil {
			return m
		}
	}
	return nil
}

// Replica returns the first data server (in Servers order) that is not
// Master, or nil if Master is. With one replica it is the data server that
// is not Master.
func (s *Sentinel) Replica() *Server {
	if rs := s.Replicas(); len(rs) > 0 {
		return rs[0]
	}
	return nil
}

// Replicas returns the data servers that are not Master, in Servers order,
// or nil if Master is.
func (s *Sentinel) Replicas() []*Server { return s.others(s.Master()) }

// others is every data server but m, in Servers order; nil when m is not
// one of them.
func (s *Sentinel) others(m *Server) []*Server {
	all := s.Servers()
	i := slices.Index(all, m)
	if m == nil || i < 0 {
		return nil
	}
	return slices.Delete(all, i, i+1)
}

// masterVia asks sentinel n for the master's address and maps it to a data
// server.
func (s *Sentinel) masterVia(ctx context.Context, n *Server) (*Server, error) {
	sc := sentinelClient(n.Addr())
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(ctx, sentinelMasterName).Result()
	if err != nil {
		return nil, fmt.Errorf("sentinel %s: GET-MASTER-ADDR-BY-NAME: %w", n.Addr(), err)
	}
	if len(a) != 2 {
		return nil, fmt.Errorf("sentinel %s: GET-MASTER-ADDR-BY-NAME: %q", n.Addr(), a)
	}
	if m := s.byPort(a[1]); m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("sentinel %s names %s:%s, not a data server of this deployment", n.Addr(), a[0], a[1])
}

func (s *Sentinel) byPort(port string) *Server {
	for _, d := range s.Servers() {
		if strconv.Itoa(d.Port()) == port {
			return d
		}
	}
	return nil
}

// Stop kills the sentinels, then the data servers (SIGKILL; nothing is kept
// on disk) and returns once all have exited. It is idempotent and is what
// StartSentinel's tb.Cleanup calls.
func (s *Sentinel) Stop() {
	haltAll(s.sentinels...)
	haltAll(s.extra...)
	s.pair.Stop()
}

// sentinelClient is a SentinelClient for one sentinel with short timeouts
// and no retries, for the fixture's own queries.
func sentinelClient(a string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{
		Addr:         a,
		MaxRetries:   -1,
		PoolSize:     1,
		DialTimeout:  clusterQueryTimeout,
		ReadTimeout:  clusterQueryTimeout,
		WriteTimeout: clusterQueryTimeout,
	})
}

// errNoGoodReplica is SENTINEL FAILOVER's NOGOODSLAVE reply.
var errNoGoodReplica = errors.New("NOGOODSLAVE")

// isNoGood reports whether err is SENTINEL FAILOVER's NOGOODSLAVE reply.
func isNoGood(err error) bool {
	return err != nil && strings.Contains(err.Error(), errNoGoodReplica.Error())
}
