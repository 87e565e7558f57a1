// Command bench measures lockactor side by side with go-redsync/redsync
// (defaults, and tuned for contention), bsm/redislock and a "raw" floor (the
// Redisson scripts sent straight from the caller, waiters woken by pub/sub,
// no actors), in one run, on a redis-server it starts itself on a free
// loopback port and stops at the end.
//
// Libraries alternate within each round (A B C A B C) and the report takes
// medians over rounds. Scenarios: uncontended, contended, multiproc (the
// tool re-executes itself as worker processes), manykeys and scale, run by
// default, and frozen, run only when named in -scenarios: lockactor alone
// on a 3-master Redis Cluster (no replicas) the tool starts on loopback,
// with one master stopped (SIGSTOP) for -freeze after a -duration baseline,
// measuring the throughput the other masters' names keep and whether their
// watchdog-renewed holds stay held. See `go run . -h` for the flags and
// RESULTS.md for a full run.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// settings are the parsed flags.
type settings struct {
	Scenarios   string
	Libs        string
	Duration    time.Duration
	Rounds      int
	Quick       bool
	JSON        bool
	Goroutines  string
	CS          string
	Procs       int
	ProcG       int
	ProcCS      string
	Peer        bool // multiproc: a Redisson-protocol waiter on the key too (peer.go)
	PeerStyle   string
	Keys        int
	KeysG       int
	Scale       scaleSpec
	PoolSize    int
	Tuning      tuning
	RedisServer string
	CPUProfile  string
	Replicas    int
	Frozen      frozenSpec
	Latency     time.Duration // one-way, each direction, on every benchmarked connection
	Pin         bool          // redis-server on the first CPU, this process and its children on the others
}

// defaultScenarios run when -scenarios is not given.
const defaultScenarios = "uncontended,contended,multiproc,manykeys,scale"

// allScenarios are every scenario -scenarios accepts: frozen (a Cluster
// fault run of lockactor alone, several seconds a round) only when named.
const allScenarios = defaultScenarios + ",frozen"

func main() {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		os.Exit(childMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole tool: parse args, start redis-server, measure, report.
func run(args []string, stdout, stderr io.Writer) int {
	s, err := parseFlags(args, stderr)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	redis.SetLogger(quietLogger{})
	bin, dep, err := setUp(s)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	srv, err := startServer(bin)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	defer srv.stop()
	if dep.PingRT, err = pingRT(srv.addr, s.Latency); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	replicas, err := startReplicas(bin, srv, s.Replicas)
	for _, r := range replicas {
		defer r.stop()
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if s.CPUProfile != "" {
		stopProfile, err := startCPUProfile(s.CPUProfile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer stopProfile()
	}
	rep, err := measure(srv, s, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.Command = "go run . " + strings.Join(args, " ")
	rep.Deployment = dep
	if s.JSON {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeMarkdown(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// startCPUProfile profiles this process until the returned func is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func parseFlags(args []string, stderr io.Writer) (settings, error) {
	var s settings
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `bench: lockactor vs redsync vs bsm/redislock vs a raw floor, on a redis-server
it starts itself (127.0.0.1, free port, no persistence) and stops at the end.

Libraries: raw, lockactor, lockactor-nosync (replica sync off), lockactor-norelay
(every local hand-off a script; see lockactor.WithRelay), redsync-default,
redsync-tuned, redislock; they
alternate within each round and the report shows medians over rounds, with
ratios against raw. Markdown on stdout (or JSON with --json), progress on stderr.

Scenarios (-scenarios): uncontended, contended, multiproc, manykeys, scale
(the default set) and frozen (only when named): lockactor alone on a
3-master Redis Cluster, no replicas, started for each round on loopback;
workers lock names of every master, a few watchdog-renewed holds are kept
on each, and after a -duration baseline master 0 is stopped (SIGSTOP) for
-freeze; reported: the other masters' acq/s before and during the freeze
and their ratio, master 0's acq/s, Lost holds per master, errors.

Deployment: by default every client talks to Redis over loopback and
shares the CPUs with it. --latency D puts D of one-way delay on each
direction of every benchmarked client connection (a same-zone network:
--latency 200us), --pin gives redis-server (replicas and cluster nodes
too) the first CPU and this process and its children the others, as if
Redis had its own host; both are stated in the report's header.

Usage: go run . [flags]

`)
		fs.PrintDefaults()
	}
	fs.StringVar(&s.Scenarios, "scenarios", defaultScenarios, "comma-separated scenarios to run (also: frozen, not in the default set)")
	fs.StringVar(&s.Libs, "libs", "all", "comma-separated libraries (raw is always run)")
	fs.DurationVar(&s.Duration, "duration", 2*time.Second, "measured window of one library in one round of one configuration")
	fs.IntVar(&s.Rounds, "rounds", 3, "rounds; each runs every library once per configuration")
	fs.BoolVar(&s.Quick, "quick", false, "smoke run: short windows, 1 round, small sizes (explicit flags still win)")
	fs.BoolVar(&s.JSON, "json", false, "print JSON (every sample, medians, targets) instead of markdown")
	fs.StringVar(&s.Goroutines, "goroutines", "64,256", "contended: goroutines (owners) on one key")
	fs.StringVar(&s.CS, "cs", "0,200us", "contended: critical sections (busy spin)")
	fs.IntVar(&s.Procs, "procs", 4, "multiproc: OS processes")
	fs.IntVar(&s.ProcG, "proc-goroutines", 64, "multiproc: goroutines per process")
	fs.StringVar(&s.ProcCS, "proc-cs", "0", "multiproc: critical sections")
	fs.BoolVar(&s.Peer, "peer", true, "multiproc: the parent also runs a Redisson-protocol waiter on the key (beside raw and lockactor), and reports its longest wait")
	fs.StringVar(&s.PeerStyle, "peer-style", "node", "multiproc: how the peer waits: node (node-redisson: unsubscribes before each try) or java (Redisson's RedissonLock: stays subscribed)")
	fs.IntVar(&s.Keys, "keys", 1000, "manykeys: names")
	fs.IntVar(&s.KeysG, "keys-goroutines", 256, "manykeys: goroutines")
	fs.IntVar(&s.Scale.Waiters, "waiters", 10000, "scale: goroutines waiting on one lock")
	fs.IntVar(&s.Scale.Names, "names", 100000, "scale: distinct names locked once each")
	fs.IntVar(&s.Scale.Held, "held", 10000, "scale: locks held at once under the watchdog")
	fs.IntVar(&s.Scale.Workers, "scale-workers", 64, "scale: goroutines that lock the names and held locks")
	fs.DurationVar(&s.Scale.Idle, "idle", time.Second, "scale: lockactor WithIdleActorTimeout for the names test")
	fs.DurationVar(&s.Scale.Watchdog, "watchdog", 3*time.Second, "scale: WithWatchdogTimeout for the held test (period = 1/3)")
	fs.IntVar(&s.Scale.Periods, "periods", 3, "scale: renewal periods counted")
	fs.DurationVar(&s.Scale.Quiet, "quiet", 500*time.Millisecond, "scale: no Redis traffic for this long means the waiters are parked")
	fs.IntVar(&s.PoolSize, "pool-size", 0, "go-redis PoolSize for every library (0: go-redis default, 10 per CPU)")
	fs.IntVar(&s.Tuning.RedsyncTries, "redsync-tries", 1<<20, "redsync-tuned: WithTries")
	fs.DurationVar(&s.Tuning.RedsyncDelay, "redsync-delay", 2*time.Millisecond, "redsync-tuned: WithRetryDelay")
	fs.DurationVar(&s.Tuning.RedislockBackoff, "redislock-backoff", 10*time.Millisecond, "redislock: LinearBackoff step")
	fs.StringVar(&s.RedisServer, "redis-server", redisBin, "redis-server binary")
	fs.StringVar(&s.Scale.HeapProfile, "heapprofile", "", "scale: write a heap profile of lockactor after the names test's settle period to this file")
	fs.IntVar(&s.Replicas, "replicas", 0, "start this many replicas of the server (lockactor's replica sync then WAITs for them; compare lockactor with lockactor-nosync)")
	fs.IntVar(&s.Frozen.Names, "frozen-names", 100, "frozen: names per master the workers lock")
	fs.IntVar(&s.Frozen.Goroutines, "frozen-goroutines", 32, "frozen: worker goroutines per master")
	fs.IntVar(&s.Frozen.Holds, "frozen-holds", 5, "frozen: long-lived (watchdog renewed) holds per master, watched for Lost")
	fs.DurationVar(&s.Frozen.Freeze, "freeze", 2*time.Second, "frozen: how long master 0 is stopped, after a --duration baseline (keep it under the 5s cluster node timeout)")
	fs.DurationVar(&s.Frozen.Watchdog, "frozen-watchdog", 1500*time.Millisecond, "frozen: lockactor WithWatchdogTimeout")
	fs.DurationVar(&s.Frozen.OpTimeout, "frozen-op-timeout", time.Second, "frozen: deadline of each worker Lock and Unlock")
	fs.DurationVar(&s.Latency, "latency", 0, "one-way delay added to each direction of every benchmarked client connection, in this process and multiproc's (0: off; a same-zone network: 200us)")
	fs.BoolVar(&s.Pin, "pin", false, "run every redis-server on the first CPU and this process and its children on the others (taskset; needs 2 CPUs); GOMAXPROCS becomes their number, and with it go-redis's default pool (10 per GOMAXPROCS) shrinks: set --pool-size to compare with an unpinned run")
	fs.StringVar(&s.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole measurement (this process only) to this file")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if s.PeerStyle != "node" && s.PeerStyle != "java" {
		return s, fmt.Errorf("--peer-style %q: want node or java", s.PeerStyle)
	}
	if s.Quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]string{
			"duration": "300ms", "rounds": "1", "goroutines": "16", "cs": "0",
			"procs": "2", "proc-goroutines": "8", "keys": "100", "keys-goroutines": "16",
			"waiters": "500", "names": "2000", "held": "500", "scale-workers": "16",
			"idle": "200ms", "watchdog": "600ms", "periods": "2", "quiet": "200ms",
			"frozen-names": "20", "frozen-goroutines": "8", "frozen-holds": "2",
		}
		for name, v := range quick {
			if !set[name] {
				_ = fs.Set(name, v)
			}
		}
	}
	if s.Rounds < 1 || s.Duration <= 0 {
		return s, fmt.Errorf("need --rounds >= 1 and --duration > 0")
	}
	if s.Latency < 0 {
		return s, fmt.Errorf("need --latency >= 0, have %v", s.Latency)
	}
	f := s.Frozen
	if f.Names < 1 || f.Goroutines < 1 || f.Holds < 0 || f.Freeze <= 0 || f.Freeze >= clusterNodeTimeout || f.Watchdog <= 0 || f.OpTimeout <= 0 {
		return s, fmt.Errorf("need --frozen-names, --frozen-goroutines >= 1, --frozen-holds >= 0, 0 < --freeze < %v, --frozen-watchdog and --frozen-op-timeout > 0", clusterNodeTimeout)
	}
	return s, nil
}
