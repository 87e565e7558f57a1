package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor"
)

var semaphoreCommand = command{
	name:    "semaphore",
	summary: "permits in use over time never exceed the limit",
	doc: "A Semaphore gets --permits permits; --workers workers spread over a few\n" +
		"instances loop for --duration: Acquire one permit, work 20-80 ms, Release,\n" +
		"pause 0-200 ms (random, --seed). Prints the permits in use over time and\n" +
		"checks that they never exceeded the limit, and that every permit came back.",
	common:   flagRedis | flagDuration | flagSeed,
	duration: 3 * time.Second,
	new:      func() scenario { return new(semDemo) },
}

// semDemo is the semaphore scenario and its flags.
type semDemo struct {
	permits, workers int
}

func (d *semDemo) define(fs *flag.FlagSet) {
	fs.IntVar(&d.permits, "permits", 3, "permits of the semaphore")
	fs.IntVar(&d.workers, "workers", 8, "workers competing for them")
}

func (d *semDemo) check(*options) error {
	return firstErr(atLeast("permits", d.permits, 1), atLeast("workers", d.workers, 1))
}

// semInstances is how many instances the workers are spread over; semLines
// how many snapshots the chart shows.
const (
	semInstances = 4
	semLines     = 20
)

// semJSON is the --json form of a semaphore run.
type semJSON struct {
	Scenario     string   `json:"scenario"`
	Backend      string   `json:"backend"`
	Seed         uint64   `json:"seed"`
	Permits      int      `json:"permits"`
	Workers      int      `json:"workers"`
	Acquisitions int      `json:"acquisitions"`
	MaxInUse     int      `json:"max_in_use"`
	OverLimit    int64    `json:"entries_over_limit"`
	Available    int      `json:"available_at_end"`
	Samples      []sample `json:"over_time"`
	OK           bool     `json:"ok"`
}

func (d *semDemo) run(ctx context.Context, e *env) error {
	clients, err := newClients(e.be.rdb, min(d.workers, semInstances))
	if err != nil {
		return err
	}
	defer closeAll(clients)
	name := e.key("sem")
	// A semaphore's key never expires: remove it when done.
	defer e.be.rdb.Del(context.WithoutCancel(ctx), name)
	sem := clients[0].Semaphore(name)
	if _, err := sem.TrySetPermits(ctx, d.permits); err != nil {
		return err
	}
	e.logf("semaphore: %d workers on %d instances share %d permits for %v, seed %d, against %s",
		d.workers, len(clients), d.permits, e.opts.duration, e.opts.seed, e.backendDesc())

	runCtx, cancel := context.WithTimeout(ctx, e.opts.duration)
	defer cancel()
	epoch := time.Now()
	var inUse atomic.Int32
	var over atomic.Int64
	logs := make([][]interval, d.workers)
	errs := make([]error, d.workers)
	var wg sync.WaitGroup
	for i := range d.workers {
		s := clients[i%len(clients)].Semaphore(name)
		rng := rand.New(rand.NewPCG(e.opts.seed, uint64(i)))
		wg.Go(func() {
			logs[i], errs[i] = semWorker(runCtx, s, rng, epoch, func(delta int32) {
				if inUse.Add(delta) > int32(d.permits) {
					over.Add(1)
				}
			})
		})
	}
	wg.Wait()
	elapsed := time.Since(epoch)
	if err := firstErr(errs...); err != nil {
		return err
	}

	res := semJSON{Scenario: "semaphore", Backend: e.backendDesc(), Seed: e.opts.seed,
		Permits: d.permits, Workers: d.workers, OverLimit: over.Load()}
	var all []interval
	for _, l := range logs {
		all = append(all, l...)
	}
	res.Acquisitions = len(all)
	res.Samples = samples(all, elapsed, semLines)
	res.MaxInUse = maxInside(all)
	if res.Available, err = sem.AvailablePermits(ctx); err != nil {
		return err
	}
	res.OK = res.MaxInUse <= d.permits && res.OverLimit == 0 && res.Available == d.permits
	if err := e.result(res, func(w io.Writer) { res.print(w) }); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("at most %d permits, but %d were in use at once (%d entries over the limit), %d available at the end",
			d.permits, res.MaxInUse, res.OverLimit, res.Available)
	}
	return nil
}

// semWorker loops until ctx ends and returns its holds; inside is told +1
// after each Acquire and -1 before each Release.
func semWorker(ctx context.Context, s *lockactor.Semaphore, rng *rand.Rand, epoch time.Time, inside func(int32)) ([]interval, error) {
	var log []interval
	for ctx.Err() == nil {
		asked := time.Since(epoch)
		if err := s.Acquire(ctx, 1); err != nil {
			if ctx.Err() != nil {
				break
			}
			return log, err
		}
		start := time.Since(epoch)
		inside(1)
		time.Sleep(time.Duration(20+rng.IntN(61)) * time.Millisecond)
		inside(-1)
		log = append(log, interval{asked: asked, start: start, end: time.Since(epoch)})
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		err := s.Release(rctx, 1)
		cancel()
		if err != nil {
			return log, err
		}
		sleep(ctx, time.Duration(rng.IntN(201))*time.Millisecond)
	}
	return log, nil
}

func (r semJSON) print(w io.Writer) {
	fmt.Fprintf(w, "   time  permits in use (limit %d), snapshots\n", r.Permits)
	for _, s := range r.Samples {
		bar := strings.Repeat("█", min(s.Inside, r.Permits)) + strings.Repeat("·", max(r.Permits-s.Inside, 0))
		if s.Inside > r.Permits {
			bar += strings.Repeat("!", s.Inside-r.Permits)
		}
		fmt.Fprintf(w, "  %5.2fs  %s %d/%d  waiting %d\n", s.At, bar, s.Inside, r.Permits, s.Waiting)
	}
	fmt.Fprintf(w, "acquisitions: %d by %d workers\n", r.Acquisitions, r.Workers)
	fmt.Fprintf(w, "permits back at the end: %d of %d\n", r.Available, r.Permits)
	fmt.Fprintf(w, "never above the limit: %s (max %d of %d permits in use at once, measured over every hold)\n", verdict(r.OK), r.MaxInUse, r.Permits)
}
