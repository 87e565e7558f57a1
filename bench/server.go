package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/tripcount"
)

// redisBin is Debian's redis-server; --redis-server overrides it.
const redisBin = "/usr/bin/redis-server"

// server is a redis-server process started by this tool on a free loopback
// port, with persistence off. Only the process we started is ever signalled.
type server struct {
	cmd   *exec.Cmd
	bin   redisExe // how it was started (the frozen scenario's nodes alike)
	addr  string
	admin *redis.Client // uncounted client for INFO and FLUSHALL
	done  chan struct{} // closed once cmd.Wait returned
	dir   string        // its working directory, removed by stop
}

// startServer launches bin on a free 127.0.0.1 port and waits until it
// answers PING with its own pid (so a port taken by someone else in between
// is detected). It tries a few ports before giving up.
func startServer(bin redisExe, extra ...string) (*server, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s, err := tryStart(bin, extra)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("start %s: %w", bin.path, lastErr)
}

// tryStart makes one attempt of startServer on a port freePort picked.
func tryStart(bin redisExe, extra []string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return tryStartOn(bin, port, extra)
}

// tryStartOn launches bin on 127.0.0.1:port with extra arguments after the
// tool's own and waits until it answers with its own pid.
func tryStartOn(bin redisExe, port int, extra []string) (*server, error) {
	// A directory of its own: a replica writes the snapshot it receives
	// there, whatever --save says, and nothing may land in the tree.
	dir, err := os.MkdirTemp("", "lockactor-bench-redis-")
	if err != nil {
		return nil, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--maxclients", "10000"}, extra...)
	cmd := bin.command(args)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &server{cmd: cmd, bin: bin, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan struct{}), dir: dir}
	go func() { _ = cmd.Wait(); close(s.done) }()
	s.admin = redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 2})
	if err := s.waitReady(5 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// startReplicas starts n replicas of primary and waits until primary counts
// them all as connected (lockactor's replica sync then WAITs for them).
func startReplicas(bin redisExe, primary *server, n int) ([]*server, error) {
	host, port, _ := net.SplitHostPort(primary.addr)
	var out []*server
	for range n {
		r, err := startServer(bin, "--replicaof", host, port)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := primary.admin.Info(ctx, "replication").Result()
		cancel()
		if err == nil && infoField(info, "connected_slaves") == strconv.Itoa(n) {
			return out, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out, fmt.Errorf("%d replicas did not connect in time", n)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls until the server answers and reports our child's pid.
func (s *server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	want := strconv.Itoa(s.cmd.Process.Pid)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return errors.New("redis-server exited at start (port taken?)")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		info, err := s.admin.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if infoField(info, "process_id") != want {
				return errors.New("port answered by a process we did not start")
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("redis-server did not answer in time")
}

// stop terminates our redis-server (SIGTERM, then SIGKILL) and waits for it.
func (s *server) stop() {
	if s.admin != nil {
		_ = s.admin.Close()
	}
	defer os.RemoveAll(s.dir)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return
	case <-time.After(3 * time.Second):
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// serverStats is what INFO tells of the server's work so far.
type serverStats struct {
	commands int64   // total of calls= over commandstats, scripts' inner commands included
	cpu      float64 // used_cpu_user + used_cpu_sys, seconds
}

// stats reads INFO cpu and commandstats. Reading costs one INFO, which the
// next reading counts; sub takes it off.
func (s *server) stats(ctx context.Context) (serverStats, error) {
	info, err := s.admin.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return serverStats{}, err
	}
	var st serverStats
	for _, line := range strings.Split(info, "\r\n") {
		if _, rest, ok := strings.Cut(line, ":calls="); ok {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			n, _ := strconv.ParseInt(rest[:end], 10, 64)
			st.commands += n
		}
	}
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, _ := strconv.ParseFloat(infoField(info, f), 64)
		st.cpu += v
	}
	return st, nil
}

// sub is what the server did between o and st, less the reading itself.
func (st serverStats) sub(o serverStats) serverStats {
	return serverStats{commands: st.commands - o.commands - 1, cpu: st.cpu - o.cpu}
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// infoField is one field of an INFO reply, "" when absent.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// quietLogger silences go-redis's own log lines (dial errors, handshake
// fallbacks) so that they do not mix with the report.
type quietLogger struct{}

// Printf discards the line.
func (quietLogger) Printf(context.Context, string, ...any) {}

// clientOptions are the go-redis options every library gets: the same pool,
// timeouts and protocol for all, so only the locking strategy differs;
// latency > 0 delays both directions of every connection (--latency).
func clientOptions(addr string, poolSize int, latency time.Duration) *redis.Options {
	return &redis.Options{Addr: addr, PoolSize: poolSize, Dialer: clientDialer(latency)}
}

// openClient returns a go-redis client with a round-trip counting hook.
func openClient(addr string, poolSize int, latency time.Duration) (*redis.Client, *tripcount.Hook) {
	rdb := redis.NewClient(clientOptions(addr, poolSize, latency))
	h := &tripcount.Hook{}
	rdb.AddHook(h)
	return rdb, h
}
