package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/lockactor/lockactor/internal/delayline"
)

// This file holds the "realistic deployment" options: --latency puts a
// same-zone network between every benchmarked client and Redis, --pin gives
// redis-server a CPU of its own, as if it ran on its own host.

// deployment is how a run placed Redis and its clients, for the report.
type deployment struct {
	Latency    time.Duration `json:"latency_ns"`            // --latency: one-way, each direction, every benchmarked connection
	ServerCPUs []int         `json:"server_cpus,omitempty"` // --pin: every redis-server the tool starts
	ClientCPUs []int         `json:"client_cpus,omitempty"` // --pin: this process and its multiproc children
	GOMAXPROCS int           `json:"gomaxprocs"`            // this process's, after --pin
	PingRT     time.Duration `json:"ping_rt_ns"`            // median PING round trip of a benchmarked client, as measured
}

// String is the report's one-line description of d.
func (d deployment) String() string {
	parts := []string{"loopback"}
	if len(d.ServerCPUs) > 0 {
		parts = append(parts, fmt.Sprintf("redis-server on %s, clients on %s (GOMAXPROCS %d)",
			cpuNoun(d.ServerCPUs), cpuNoun(d.ClientCPUs), d.GOMAXPROCS))
	}
	if d.Latency > 0 {
		parts = append(parts, fmt.Sprintf("+%v one-way latency on every client connection (+%v a round trip)", d.Latency, 2*d.Latency))
	}
	if d.PingRT > 0 {
		parts = append(parts, fmt.Sprintf("a PING takes %v (median of %d)", d.PingRT.Round(time.Microsecond), pingSamples))
	}
	return strings.Join(parts, "; ")
}

// pingSamples is how many PINGs pingRT times.
const pingSamples = 100

// pingRT is the median PING round trip of a client with the benchmarked
// clients' options: what a round trip costs in this configuration, delay
// lines and wake-ups included.
func pingRT(addr string, latency time.Duration) (time.Duration, error) {
	rdb := redis.NewClient(clientOptions(addr, 1, latency))
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil { // dials and says HELLO
		return 0, fmt.Errorf("ping: %w", err)
	}
	rts := make([]time.Duration, pingSamples)
	for i := range rts {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return 0, fmt.Errorf("ping: %w", err)
		}
		rts[i] = time.Since(t0)
	}
	slices.Sort(rts)
	return rts[len(rts)/2], nil
}

// cpuNoun is "CPU 0" or "CPUs 1-3".
func cpuNoun(cpus []int) string {
	if len(cpus) == 1 {
		return "CPU " + cpuList(cpus)
	}
	return "CPUs " + cpuList(cpus)
}

// cpuList writes ascending cpus as taskset -c does: "0", "1-3", "0,2-3".
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i])+"-"+strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// clientDialer is the go-redis Dialer of every benchmarked client: nil
// (go-redis's own) without latency, else one that runs both directions of
// each connection through a delay line of latency, so a round trip gains
// twice latency while writes never block and pipelining goes on. The
// waker (wake.go) keeps sub-millisecond delays on time.
func clientDialer(latency time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if latency <= 0 {
		return nil
	}
	delay := wakingDelay(latency)
	return delayline.Dialer(func(c net.Conn) net.Conn {
		return delayline.New(c, delayline.Delays{Read: delay, Write: delay})
	})
}

// redisExe is how the tool starts redis-server: the binary and, with
// --pin, taskset and the CPUs it runs on.
type redisExe struct {
	path    string // --redis-server
	taskset string // the taskset binary; "" runs redis-server unpinned
	cpus    string // taskset -c list
}

// command is the exec.Cmd that runs redis-server with args, under taskset
// when pinned (taskset execs it: the pid is redis-server's own).
func (e redisExe) command(args []string) *exec.Cmd {
	if e.taskset == "" {
		return exec.Command(e.path, args...)
	}
	return exec.Command(e.taskset, append([]string{"-c", e.cpus, e.path}, args...)...)
}

// setUp applies s's deployment to this process and returns how
// redis-server is to be started and the report's description of it.
// --latency makes the waker's timerfd now; --pin pins this process.
func setUp(s settings) (redisExe, deployment, error) {
	exe := redisExe{path: s.RedisServer}
	dep := deployment{Latency: s.Latency}
	if s.Latency > 0 {
		if err := theWaker.ready(); err != nil {
			return exe, dep, fmt.Errorf("--latency: %w", err)
		}
	}
	if s.Pin {
		taskset, server, clients, err := pinSelf()
		if err != nil {
			return exe, dep, err
		}
		exe.taskset, exe.cpus = taskset, cpuList(server)
		dep.ServerCPUs, dep.ClientCPUs = server, clients
	}
	dep.GOMAXPROCS = runtime.GOMAXPROCS(0)
	return exe, dep, nil
}

// pinSelf moves every thread of this process to the CPUs after the first
// one it may use (multiproc's children inherit them) and sets GOMAXPROCS
// to their number, so that the scheduler does not run more threads than
// it has CPUs. The first CPU is left for redis-server, started by taskset.
func pinSelf() (taskset string, server, clients []int, err error) {
	taskset, err = exec.LookPath("taskset")
	if err != nil {
		return "", nil, nil, fmt.Errorf("--pin: %w (taskset is in util-linux)", err)
	}
	allowed, err := allowedCPUs()
	if err != nil {
		return "", nil, nil, err
	}
	if server, clients, err = splitCPUs(allowed); err != nil {
		return "", nil, nil, err
	}
	if err := pinThreads(clients); err != nil {
		return "", nil, nil, err
	}
	runtime.GOMAXPROCS(len(clients))
	return taskset, server, clients, nil
}

// allowedCPUs are the CPUs this process may run on, ascending.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("--pin: sched_getaffinity: %w", err)
	}
	var out []int
	for cpu := 0; len(out) < set.Count(); cpu++ {
		if set.IsSet(cpu) {
			out = append(out, cpu)
		}
	}
	return out, nil
}

// splitCPUs gives the first allowed CPU to redis-server and the others to
// the clients; with fewer than two there is nothing to split.
func splitCPUs(allowed []int) (server, clients []int, err error) {
	if len(allowed) < 2 {
		return nil, nil, fmt.Errorf("--pin needs at least 2 CPUs, this process may use %d (%s)", len(allowed), cpuList(allowed))
	}
	return allowed[:1], allowed[1:], nil
}

// pinThreads sets the affinity of every thread of this process to cpus.
// A thread started meanwhile may inherit the old mask, so the pass is
// repeated until it finds no thread it has not pinned yet.
func pinThreads(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	pinned := map[int]bool{}
	for {
		tids, err := threadIDs()
		if err != nil {
			return err
		}
		fresh := 0
		for _, tid := range tids {
			if pinned[tid] {
				continue
			}
			err := unix.SchedSetaffinity(tid, &set)
			if err != nil && !errors.Is(err, unix.ESRCH) { // ESRCH: the thread has exited
				return fmt.Errorf("--pin: sched_setaffinity of thread %d: %w", tid, err)
			}
			pinned[tid] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
}

// threadIDs lists this process's threads (/proc/self/task).
func threadIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("--pin: list threads: %w", err)
	}
	var out []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, tid)
		}
	}
	return out, nil
}
