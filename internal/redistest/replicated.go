package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	replReadyTimeout = 5 * time.Second // replica link up, sync, promotion
	replPollInterval = 2 * time.Millisecond
)

// replArgs go to every server that takes part in replication (either may
// become master). Full syncs go through an RDB file that is deleted once
// sent and loaded, and SIGTERM does not wait up to 10s for a lagging or
// paused replica. Not diskless sync: after one, Redis 7.0 streams commands
// only from the replica's first ACK, which it sends once a second, so in
// about one start in five the first write took ~1s to reach the replica.
var replArgs = []string{
	"--repl-diskless-sync", "no", "--rdb-del-sync-files", "yes",
	"--shutdown-timeout", "0",
}

// pairArgs add, for a Replicated pair, a faster server cron: the finished
// sync BGSAVE is noticed there, so the pair starts in ~30ms instead of ~115ms.
var pairArgs = append(append([]string(nil), replArgs...), "--hz", "100")

// Replicated is a master and one replica of it (plain replication, no
// Sentinel, no cluster) started by StartReplicated. Master and Replica return
// the servers as started; Promote and faults do not swap them.
type Replicated struct {
	master, replica *Server
	link            *Proxy // the replication link (StartReplicatedLinked), or nil
}

// StartReplicated starts a master and a replica (--replicaof the master) on
// free 127.0.0.1 ports, each as by Start plus settings for a fast full sync
// (and hz 100) and then extraArgs, waits (at most 5s) until the replica reports
// master_link_status:up and the master lists it online, and registers
// tb.Cleanup to stop both. A pair is ready in a few milliseconds and stops
// as fast, so a test may start a fresh one per round (call Stop at the end
// of a round to free it at once).
//
// The replica keeps its --replicaof across Restart: a restarted replica
// resyncs from the master (or keeps trying while the master is down). The
// master restarts empty, as a master.
//
// There is no miniredis fallback: without redis-server on PATH the test
// fails when LOCKACTOR_REQUIRE_REDIS=1 and is skipped otherwise.
func StartReplicated(tb testing.TB, extraArgs ...string) *Replicated {
	tb.Helper()
	return startReplicatedTB(tb, extraArgs, nil)
}

// StartReplicatedLinked is StartReplicated with the replication link going
// through a Proxy (Link), so a test can make the replica lag for real:
// Link().Freeze(nil) holds back everything the master sends from then on,
// and a master killed while the link is frozen takes those writes with it.
// (Pausing the replica does not do that: the bytes wait in its socket
// buffer and are applied on Resume.) The replica's INFO shows the proxy's
// port as master_port.
func StartReplicatedLinked(tb testing.TB, extraArgs ...string) *Replicated {
	tb.Helper()
	return startReplicatedTB(tb, extraArgs, func(m *Server) *Proxy { return NewProxy(tb, m.Addr()) })
}

func startReplicatedTB(tb testing.TB, extraArgs []string, link func(*Server) *Proxy) *Replicated {
	tb.Helper()
	paths, ok := needTools(tb, "a replicated pair", "redis-server")
	if !ok {
		return nil
	}
	dir := tb.TempDir() // before tb.Cleanup(r.Stop), so both stop before it is removed
	r, err := startReplicated(paths[0], dir, extraArgs, link)
	if err != nil {
		tb.Fatalf("redistest: StartReplicated: %v", err)
		return nil
	}
	tb.Cleanup(r.Stop)
	return r
}

// startReplicated starts the pair in dir, the replica replicating from
// link(master) if link is not nil, and waits until it is linked. On error
// (or a Fatalf in link) every server it started has been stopped.
func startReplicated(bin, dir string, extraArgs []string, link func(*Server) *Proxy) (*Replicated, error) {
	var err error
	args := append(append([]string(nil), pairArgs...), extraArgs...)
	r, done := &Replicated{}, false
	defer func() {
		if !done { // an error, or runtime.Goexit from a Fatalf in link
			haltAll(r.master, r.replica)
		}
	}()
	mdir := filepath.Join(dir, "master") // --dir: a sync file is never the other's dump.rdb
	if err = os.Mkdir(mdir, 0o755); err != nil {
		return nil, err
	}
	if r.master, err = startNode(bin, mdir, nodeSpec{name: "master", args: func(int) []string { return args }}); err != nil {
		return nil, err
	}
	upstream := r.master.Port()
	if link != nil {
		r.link = link(r.master)
		_, p, _ := net.SplitHostPort(r.link.Addr())
		upstream, _ = strconv.Atoi(p)
	}
	if r.replica, err = startReplicaOf(bin, filepath.Join(dir, "replica"), r.master, upstream, args); err != nil {
		return nil, err
	}
	done = true
	return r, nil
}

// startReplicaOf starts a replica of master in dir (made here) replicating
// from upstream (master's port, or a proxy's), with args, and waits until
// it is linked. The replica is returned with the error too (nil if it
// never started), so that the caller stops it.
func startReplicaOf(bin, dir string, master *Server, upstream int, args []string) (*Server, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	replicaArgs := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(upstream)}, args...)
	r, err := startNode(bin, dir, nodeSpec{name: "replica", args: func(int) []string { return replicaArgs }})
	if err != nil {
		return nil, err
	}
	if err := waitReplicaOf(r, master, upstream, replReadyTimeout); err != nil {
		return r, fmt.Errorf("%w\n--- tail of %s ---\n%s", err, r.LogPath(), tail(r.LogPath()))
	}
	return r, nil
}

// waitReplicaOf polls until replica reports role:slave of master's port with
// master_link_status:up and master lists it online in INFO replication.
// upstream is the port the replica replicates from: master's, or a proxy's.
func waitReplicaOf(replica, master *Server, upstream int, timeout time.Duration) error {
	what := fmt.Sprintf("%s replicating %s", replica.Addr(), master.Addr())
	return poll(what, timeout, replPollInterval, func(ctx context.Context) error {
		ri, err := info(ctx, replica.Addr(), "replication")
		if err != nil {
			return err
		}
		if ri["role"] != "slave" || ri["master_port"] != strconv.Itoa(upstream) || ri["master_link_status"] != "up" {
			return fmt.Errorf("replica: role:%s master_port:%s master_link_status:%s", ri["role"], ri["master_port"], ri["master_link_status"])
		}
		mi, err := info(ctx, master.Addr(), "replication")
		if err != nil {
			return err
		}
		for i := 0; ; i++ {
			v, ok := mi["slave"+strconv.Itoa(i)]
			if !ok {
				return fmt.Errorf("master: role:%s connected_slaves:%s, none is %s online", mi["role"], mi["connected_slaves"], replica.Addr())
			}
			f := infoFields(v)
			if f["port"] == strconv.Itoa(replica.Port()) && f["state"] == "online" {
				return nil
			}
		}
	})
}

// Master returns the server started as master.
func (r *Replicated) Master() *Server { return r.master }

// Replica returns the server started as replica.
func (r *Replicated) Replica() *Server { return r.replica }

// Link returns the proxy the replica replicates through
// (StartReplicatedLinked), or nil for StartReplicated.
func (r *Replicated) Link() *Proxy { return r.link }

// WaitSynced reads the master's master_repl_offset and waits (at most 5s)
// until the replica has processed the stream up to it, so every write the
// master had applied before the call is on the replica. It fails the test
// (showing both offsets) otherwise, e.g. while the replica is paused.
func (r *Replicated) WaitSynced(tb testing.TB) {
	tb.Helper()
	if err := waitSynced(r.master, r.replica, replReadyTimeout); err != nil {
		tb.Fatalf("redistest: WaitSynced: %v", err)
	}
}

// waitSynced waits until replica's processed offset reaches master's
// current master_repl_offset.
func waitSynced(master, replica *Server, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
	mi, err := info(ctx, master.Addr(), "replication")
	cancel()
	if err != nil {
		return err
	}
	want, err := strconv.ParseInt(mi["master_repl_offset"], 10, 64)
	if err != nil {
		return fmt.Errorf("%s: master_repl_offset %q: %v", master.Addr(), mi["master_repl_offset"], err)
	}
	what := fmt.Sprintf("%s at master offset %d of %s", replica.Addr(), want, master.Addr())
	return poll(what, timeout, replPollInterval, func(ctx context.Context) error {
		ri, err := info(ctx, replica.Addr(), "replication")
		if err != nil {
			return err
		}
		got, err := strconv.ParseInt(ri["slave_repl_offset"], 10, 64)
		if err != nil || ri["master_link_status"] != "up" {
			return fmt.Errorf("replica role:%s master_link_status:%s slave_repl_offset:%s",
				ri["role"], ri["master_link_status"], ri["slave_repl_offset"])
		}
		if got < want {
			return fmt.Errorf("replica slave_repl_offset:%d < %d", got, want)
		}
		return nil
	})
}

// Promote sends REPLICAOF NO ONE to the replica and waits (at most 5s)
// until it reports role:master. It does not touch the master: if that is
// still running, there are two masters (and the old one keeps its data).
func (r *Replicated) Promote(tb testing.TB) {
	tb.Helper()
	if err := promote(r.replica); err != nil {
		tb.Fatalf("redistest: Promote %s: %v", r.replica.Addr(), err)
	}
}

func promote(s *Server) error {
	rc := queryClient(s.Addr())
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
	err := rc.ReplicaOf(ctx, "NO", "ONE").Err()
	cancel()
	if err != nil {
		return fmt.Errorf("REPLICAOF NO ONE: %w", err)
	}
	return poll("role:master", replReadyTimeout, replPollInterval, func(ctx context.Context) error {
		ri, err := info(ctx, s.Addr(), "replication")
		if err != nil {
			return err
		}
		if ri["role"] != "master" {
			return fmt.Errorf("role:%s", ri["role"])
		}
		return nil
	})
}

// Stop kills both servers (SIGKILL: they keep nothing on disk, and SIGTERM
// would cost up to 100ms) and returns once they have exited. It is
// idempotent and is what StartReplicated's tb.Cleanup calls.
func (r *Replicated) Stop() { haltAll(r.master, r.replica) }

// infoFields splits a "k=v,k=v" INFO value such as slave0's.
func infoFields(v string) map[string]string {
	m := map[string]string{}
	for f := range strings.SplitSeq(v, ",") {
		if k, val, ok := strings.Cut(f, "="); ok {
			m[k] = val
		}
	}
	return m
}
