package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/syncx"
)

// frozenMasters is the size of the frozen scenario's cluster; master 0 is
// the one stopped.
const frozenMasters = 3

// frozenAfter is the window measured right after master 0 resumes.
const frozenAfter = time.Second

// frozenTick is the bucket of the finest-grained throughput reading.
const frozenTick = 100 * time.Millisecond

// frozenWarmup runs the workers unmeasured before the baseline window:
// actors started, scripts loaded, pools filled.
const frozenWarmup = 500 * time.Millisecond

// frozenSpec sizes the frozen scenario: a 3-master Redis Cluster, workers
// locking names of each master, a few long-lived holds per master, and
// master 0 stopped (SIGSTOP) for Freeze after a Baseline window.
type frozenSpec struct {
	Names      int           // names per master the workers lock
	Goroutines int           // workers per master
	Holds      int           // long-lived (watchdog renewed) holds per master
	Freeze     time.Duration // how long master 0 stays stopped
	Watchdog   time.Duration // lockactor WithWatchdogTimeout
	OpTimeout  time.Duration // deadline of every worker Lock and Unlock
	Baseline   time.Duration `json:"-"` // --duration
	PoolSize   int           `json:"-"` // --pool-size
	Latency    time.Duration `json:"-"` // --latency
	Bin        redisExe      `json:"-"` // --redis-server (and --pin)
}

// titleFrozen is the frozen scenario's table title.
func titleFrozen(sp frozenSpec) string {
	return fmt.Sprintf("frozen: %d masters x %d goroutines over %d names each, %d holds each; master 0 stopped %v",
		frozenMasters, sp.Goroutines, sp.Names, sp.Holds, sp.Freeze)
}

// frozenConfigs is the frozen scenario's one table, lockactor only (the
// other libraries have no Cluster support here); none if lockactor is not
// among libs. Its nodes are started the way srv was.
func frozenConfigs(srv *server, s settings, libs []libSpec) []config {
	var fl []libSpec
	for _, l := range libs {
		if l.Name == "lockactor" {
			fl = append(fl, l)
		}
	}
	if len(fl) == 0 {
		return nil
	}
	sp := s.Frozen
	sp.Baseline, sp.PoolSize, sp.Latency, sp.Bin = s.Duration, s.PoolSize, s.Latency, srv.bin
	return []config{{Scenario: "frozen", Title: titleFrozen(sp), Libs: fl,
		run: func(libSpec) (map[string]float64, string, error) { return runFrozen(sp) }}}
}

// frozenCounts are the per-master counters the workers keep.
type frozenCounts struct {
	acq        [frozenMasters]atomic.Int64
	errs       [frozenMasters]atomic.Int64
	violations atomic.Int64

	mu       sync.Mutex
	firstErr [frozenMasters]error
}

// fail counts an error of a worker on master m.
func (fc *frozenCounts) fail(m int, err error) {
	fc.errs[m].Add(1)
	fc.mu.Lock()
	if fc.firstErr[m] == nil {
		fc.firstErr[m] = err
	}
	fc.mu.Unlock()
}

// frozenMark is the acquisitions per master at one instant.
type frozenMark struct {
	at  time.Time
	acq [frozenMasters]int64
}

// mark reads the acquisition counters now.
func (fc *frozenCounts) mark() frozenMark {
	fm := frozenMark{at: time.Now()}
	for m := range fm.acq {
		fm.acq[m] = fc.acq[m].Load()
	}
	return fm
}

// rate is master set ms's acquisitions per second between a and b.
func rate(a, b frozenMark, ms ...int) float64 {
	var n int64
	for _, m := range ms {
		n += b.acq[m] - a.acq[m]
	}
	return div(float64(n), b.at.Sub(a.at).Seconds())
}

// runFrozen is one round of the frozen scenario: start the cluster, open
// lockactor on it, take the long-lived holds, run the workers through the
// baseline, freeze and after windows, then count the Lost holds. The
// cluster is stopped whatever happens.
func runFrozen(sp frozenSpec) (map[string]float64, string, error) {
	cl, err := startCluster(sp.Bin, frozenMasters)
	if err != nil {
		return nil, "", fmt.Errorf("start cluster: %w", err)
	}
	defer cl.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.addrs(), PoolSize: sp.PoolSize, Dialer: clientDialer(sp.Latency)})
	defer rdb.Close()
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		return nil, "", fmt.Errorf("cluster client: %w", err)
	}
	c, err := lockactor.New(rdb, lockactor.WithWatchdogTimeout(sp.Watchdog))
	if err != nil {
		return nil, "", fmt.Errorf("lockactor.New: %w", err)
	}
	defer c.Close()
	names, err := cl.namesPerMaster(ctx, "frozen:", "k", sp.Names)
	if err != nil {
		return nil, "", fmt.Errorf("worker names: %w", err)
	}
	holdNames, err := cl.namesPerMaster(ctx, "frozen:", "h", sp.Holds)
	if err != nil {
		return nil, "", fmt.Errorf("hold names: %w", err)
	}
	holds := make([][]*lockactor.Lock, frozenMasters)
	for m, ns := range holdNames {
		for _, n := range ns {
			h := c.Lock(n)
			if err := h.Lock(ctx); err != nil {
				return nil, "", fmt.Errorf("long-lived hold: %w", err)
			}
			holds[m] = append(holds[m], h)
		}
	}

	fc := &frozenCounts{}
	in := newInside(frozenMasters * sp.Names)
	var stop atomic.Bool
	var wg, running = sync.WaitGroup{}, atomic.Int64{}
	for m := range frozenMasters {
		for g := range sp.Goroutines {
			wg.Add(1)
			running.Add(1)
			go func() {
				defer wg.Done()
				defer running.Add(-1)
				frozenWorker(c, sp, names[m], m, rand.New(rand.NewPCG(uint64(m), uint64(g))), in, fc, &stop)
			}()
		}
	}
	time.Sleep(frozenWarmup)
	stopTicks := make(chan struct{})
	ticks := sampleMarks(fc, frozenTick, stopTicks)
	m0 := fc.mark()
	time.Sleep(sp.Baseline)
	m1 := fc.mark()
	err = cl.freeze(0)
	if err == nil {
		time.Sleep(sp.Freeze)
	}
	m2 := fc.mark()
	close(stopTicks)
	if terr := cl.thaw(0); err == nil {
		err = terr
	}
	resumed := time.Now()
	time.Sleep(frozenAfter)
	m3 := fc.mark()
	stop.Store(true)
	stuck := waitWorkers(&wg, &running, 2*sp.OpTimeout+hardLimit)
	if err != nil {
		return nil, "", err
	}
	// The holds on master 0 are found lost by the renewal that follows the
	// resume; give it up to one watchdog timeout.
	lost, silent := countLost(ctx, rdb, holds, resumed.Add(sp.Watchdog))
	for m := range holds {
		for _, h := range holds[m] {
			uctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := h.Unlock(uctx)
			cancel()
			if err != nil && !lostNow(h) {
				fc.fail(m, fmt.Errorf("unlock long-lived hold: %w", err))
			}
		}
	}

	healthy := []int{1, 2}
	base, frozen := rate(m0, m1, healthy...), rate(m1, m2, healthy...)
	minRatio := -1.0
	for _, m := range healthy {
		if r := div(rate(m1, m2, m), rate(m0, m1, m)); minRatio < 0 || r < minRatio {
			minRatio = r
		}
	}
	return map[string]float64{
		"base_acq_s":      base,
		"frozen_acq_s":    frozen,
		"ratio":           div(frozen, base),
		"ratio_min":       minRatio,
		"dip":             div(worstRate(<-ticks, m1.at, m2.at, healthy...), base),
		"m0_base_acq_s":   rate(m0, m1, 0),
		"m0_frozen_acq_s": rate(m1, m2, 0),
		"m0_after_acq_s":  rate(m2, m3, 0),
		"lost_healthy":    float64(lost[1] + lost[2]),
		"lost_frozen":     float64(lost[0]),
		"silent_lost":     float64(silent),
		"errors_m0":       float64(fc.errs[0].Load()),
		"errors_healthy":  float64(fc.errs[1].Load() + fc.errs[2].Load()),
		"violations":      float64(fc.violations.Load()),
		"stuck":           float64(stuck),
	}, fc.note(), nil
}

// frozenWorker locks and unlocks random names of master m until stop, each
// call bounded by sp.OpTimeout, counting grants and errors on fc.
func frozenWorker(c *lockactor.Client, sp frozenSpec, names []string, m int, rng *rand.Rand, in *inside, fc *frozenCounts, stop *atomic.Bool) {
	lockers := make([]*lockactor.Lock, len(names))
	for !stop.Load() {
		k := rng.IntN(len(names))
		if lockers[k] == nil {
			lockers[k] = c.Lock(names[k])
		}
		lk := lockers[k]
		ctx, cancel := context.WithTimeout(context.Background(), sp.OpTimeout)
		err := lk.Lock(ctx)
		cancel()
		if err != nil {
			fc.fail(m, fmt.Errorf("lock: %w", err))
			if !errors.Is(err, context.DeadlineExceeded) {
				time.Sleep(time.Millisecond) // no hot loop on a refusal
			}
			continue
		}
		fc.acq[m].Add(1)
		cell := m*len(names) + k
		if !in.enter(cell) {
			fc.violations.Add(1)
		}
		in.exit(cell)
		ctx, cancel = context.WithTimeout(context.Background(), sp.OpTimeout)
		err = lk.Unlock(ctx)
		cancel()
		if err != nil {
			fc.fail(m, fmt.Errorf("unlock: %w", err))
		}
	}
}

// sampleMarks reads fc's counters every interval until stop closes, then
// sends the readings.
func sampleMarks(fc *frozenCounts, every time.Duration, stop <-chan struct{}) <-chan []frozenMark {
	out := make(chan []frozenMark, 1)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		var marks []frozenMark
		for {
			select {
			case <-stop:
				out <- marks
				return
			case <-t.C:
				marks = append(marks, fc.mark())
			}
		}
	}()
	return out
}

// worstRate is the lowest rate of masters ms between two consecutive
// readings that both fall within [from, to].
func worstRate(marks []frozenMark, from, to time.Time, ms ...int) float64 {
	worst := -1.0
	for i := 1; i < len(marks); i++ {
		a, b := marks[i-1], marks[i]
		if a.at.Before(from) || b.at.After(to) {
			continue
		}
		if r := rate(a, b, ms...); worst < 0 || r < worst {
			worst = r
		}
	}
	return worst
}

// waitWorkers waits up to limit for wg and returns how many workers were
// still running then.
func waitWorkers(wg *sync.WaitGroup, running *atomic.Int64, limit time.Duration) int64 {
	if syncx.WaitUntil(wg, time.Now().Add(limit)) {
		return 0
	}
	return running.Load()
}

// countLost waits until every hold of master 0 has lost its lease or until
// deadline, then counts per master the holds whose Lost channel closed, and
// the holds whose key is gone from Redis while Lost stayed open (silent).
func countLost(ctx context.Context, rdb *redis.ClusterClient, holds [][]*lockactor.Lock, deadline time.Time) (lost [frozenMasters]int, silent int) {
	for time.Now().Before(deadline) {
		all := true
		for _, h := range holds[0] {
			all = all && lostNow(h)
		}
		if all {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for m := range holds {
		for _, h := range holds[m] {
			if lostNow(h) {
				lost[m]++
				continue
			}
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			n, err := rdb.Exists(qctx, h.Name()).Result()
			cancel()
			if err == nil && n == 0 {
				silent++
			}
		}
	}
	return lost, silent
}

// lostNow reports whether h's Lost channel is closed.
func lostNow(h *lockactor.Lock) bool {
	select {
	case <-h.Lost():
		return true
	default:
		return false
	}
}

// note is the first error on a healthy master, or else master 0's.
func (fc *frozenCounts) note() string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, m := range []int{1, 2, 0} {
		if err := fc.firstErr[m]; err != nil {
			return fmt.Sprintf("master %d: %v", m, err)
		}
	}
	return ""
}
