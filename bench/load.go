package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor/internal/syncx"
	"github.com/lockactor/lockactor/internal/tripcount"
)

// loadSpec is one measured run of one library in one process: G goroutines,
// each its own owner, lock and unlock names drawn from NKeys for Duration.
// It is also what the parent sends a child process, as JSON.
type loadSpec struct {
	Lib        string        `json:"lib"`
	Scenario   string        `json:"scenario"` // profile label only
	Addr       string        `json:"addr"`
	Prefix     string        `json:"prefix"` // names are Prefix + index
	NKeys      int           `json:"nkeys"`
	Goroutines int           `json:"goroutines"`
	CS         time.Duration `json:"cs"`
	Duration   time.Duration `json:"duration"`
	PoolSize   int           `json:"pool_size"`
	Latency    time.Duration `json:"latency"` // --latency, each direction
	Tuning     tuning        `json:"tuning"`
	Shared     string        `json:"shared,omitempty"`    // mapped inside counters (multiproc)
	Peer       bool          `json:"peer,omitempty"`      // multiproc: the parent runs a peer (peer.go)
	PeerJava   bool          `json:"peer_java,omitempty"` // the peer waits as Redisson's Java client does
	Proc       int           `json:"proc"`                // child index, seeds its draws
	Start      time.Time     `json:"start"`               // when every process starts
}

// loadResult is what one process measured.
type loadResult struct {
	Acq        int64       `json:"acq"`         // acquisitions granted inside the window
	Seconds    float64     `json:"seconds"`     // the window
	Wait       *hist       `json:"wait"`        // Lock call start to grant
	Pair       *hist       `json:"pair"`        // Lock call start to Unlock return
	RoundTrips int64       `json:"round_trips"` // hook calls during the run
	ServerCmds int64       `json:"server_cmds"` // INFO commandstats delta (parent)
	ServerCPU  float64     `json:"server_cpu"`  // redis-server CPU seconds (parent)
	ClientCPU  float64     `json:"client_cpu"`  // this process's CPU seconds during the run
	PerOwner   []int64     `json:"per_owner"`
	PerProc    []int64     `json:"per_proc,omitempty"` // acquisitions per process (multiproc)
	Violations int64       `json:"violations"`         // grants while another holder was inside
	GaveUp     int64       `json:"gave_up"`            // the library's own give-ups, retried
	Errors     int64       `json:"errors"`             // other Lock/Unlock errors
	FirstErr   string      `json:"first_err,omitempty"`
	Stuck      int64       `json:"stuck"`          // goroutines still running at the hard limit
	Peer       *peerResult `json:"peer,omitempty"` // multiproc with --peer
}

// hardLimit is how long after the window a run may take to wind down.
const hardLimit = 30 * time.Second

// unlockTimeout bounds every Unlock.
const unlockTimeout = 10 * time.Second

// spin busy-waits d: timers tick at 1 ms here, so sleeping would not do.
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for t := time.Now(); time.Since(t) < d; {
	}
}

// keyName is name i of a run.
func keyName(prefix string, i int) string { return prefix + strconv.Itoa(i) }

// runLoad runs spec on an opened library and reports what it measured.
func runLoad(spec loadSpec, l lib, hook *tripcount.Hook, in *inside) loadResult {
	g := spec.Goroutines
	res := loadResult{Seconds: spec.Duration.Seconds(), PerOwner: make([]int64, g), Wait: &hist{}, Pair: &hist{}}
	end := spec.Start.Add(spec.Duration)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()

	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		running  atomic.Int64
		gate     = make(chan struct{})
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		res.Errors++
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for i := 0; i < g; i++ {
		wg.Add(1)
		running.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			w := worker{spec: spec, lib: l, in: in, end: end, owner: i,
				rng:  rand.New(rand.NewPCG(uint64(spec.Proc<<20+i), uint64(spec.Start.UnixNano()))),
				wait: &hist{}, pair: &hist{}, fail: fail}
			<-gate
			w.run(ctx)
			mu.Lock()
			res.Acq += w.acq
			res.PerOwner[i] = w.acq
			res.Violations += w.violations
			res.GaveUp += w.gaveUp
			res.Wait.merge(w.wait)
			res.Pair.merge(w.pair)
			mu.Unlock()
		}()
	}
	time.Sleep(time.Until(spec.Start))
	trips0, cpu0 := hook.RoundTrips(), processCPU()
	close(gate)

	if !syncx.WaitUntil(&wg, end.Add(hardLimit)) {
		mu.Lock()
		res.Stuck = running.Load()
		mu.Unlock()
	}
	res.RoundTrips = hook.RoundTrips() - trips0
	res.ClientCPU = (processCPU() - cpu0).Seconds()
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		res.FirstErr = firstErr.Error()
	}
	return res
}

// worker is one goroutine of a load run: one owner, its own lockers.
type worker struct {
	spec    loadSpec
	lib     lib
	in      *inside
	end     time.Time
	owner   int
	rng     *rand.Rand
	lockers map[int]locker
	fail    func(error)

	acq, violations, gaveUp int64
	wait, pair              *hist
}

func (w *worker) locker(k int) locker {
	if w.lockers == nil {
		w.lockers = map[int]locker{}
	}
	lk := w.lockers[k]
	if lk == nil {
		lk = w.lib.Locker(keyName(w.spec.Prefix, k))
		w.lockers[k] = lk
	}
	return lk
}

func (w *worker) run(ctx context.Context) {
	for {
		t0 := time.Now()
		if !t0.Before(w.end) {
			return
		}
		k := 0
		if w.spec.NKeys > 1 {
			k = w.rng.IntN(w.spec.NKeys)
		}
		lk := w.locker(k)
		err := lk.Lock(ctx)
		for errors.Is(err, errGaveUp) {
			w.gaveUp++
			err = lk.Lock(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.fail(fmt.Errorf("lock: %w", err))
			time.Sleep(time.Millisecond)
			continue
		}
		got := time.Now()
		if !w.in.enter(k) {
			w.violations++
		}
		spin(w.spec.CS)
		w.in.exit(k)
		uctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		err = lk.Unlock(uctx)
		cancel()
		if err != nil {
			w.fail(fmt.Errorf("unlock: %w", err))
		}
		if got.Before(w.end) {
			w.acq++
			w.wait.add(got.Sub(t0))
			w.pair.add(time.Since(t0))
		}
	}
}

// runInProcess opens spec's library on a fresh counted client, runs the load
// in this process and adds the server-side command count.
func runInProcess(srv *server, spec loadSpec, ls libSpec) (loadResult, error) {
	rdb, hook := openClient(srv.addr, spec.PoolSize, spec.Latency)
	defer rdb.Close()
	l, err := ls.Open(rdb)
	if err != nil {
		return loadResult{}, err
	}
	defer l.Close()
	in := newInside(max(spec.NKeys, 1))
	ctx := context.Background()
	spec.Start = time.Now().Add(20 * time.Millisecond)
	st0, err := srv.stats(ctx)
	if err != nil {
		return loadResult{}, err
	}
	var res loadResult
	// Labels let `go tool pprof -tags` or `-tagfocus lib=NAME` split a
	// --cpuprofile by library and scenario; goroutines started inside
	// inherit them.
	pprof.Do(ctx, pprof.Labels("lib", ls.Name, "scenario", spec.Scenario), func(context.Context) { res = runLoad(spec, l, hook, in) })
	st1, err := srv.stats(ctx)
	if err != nil {
		return loadResult{}, err
	}
	d := st1.sub(st0)
	res.ServerCmds, res.ServerCPU = d.commands, d.cpu
	return res, nil
}

// flush empties the server between runs (scripts stay cached).
func flush(srv *server) error {
	return srv.admin.FlushAll(context.Background()).Err()
}
