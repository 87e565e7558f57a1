package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

var latchCommand = command{
	name:    "latch",
	summary: "waiters on every instance go on only once all workers counted down",
	doc: "A CountDownLatch is set to --workers; each worker, on its own instance,\n" +
		"works 20-200 ms (random, --seed) and counts down once. --waiters waiters,\n" +
		"each on its own instance, Await it. Checks that no waiter went on before\n" +
		"the last count-down, that every waiter went on, and that the count ends at 0.",
	common: flagRedis | flagSeed,
	new:    func() scenario { return new(latchDemo) },
}

// latchDemo is the latch scenario and its flags.
type latchDemo struct {
	workers, waiters int
}

func (d *latchDemo) define(fs *flag.FlagSet) {
	fs.IntVar(&d.workers, "workers", 4, "workers that count the latch down, once each")
	fs.IntVar(&d.waiters, "waiters", 3, "waiters that Await it")
}

func (d *latchDemo) check(*options) error {
	return firstErr(atLeast("workers", d.workers, 1), atLeast("waiters", d.waiters, 1))
}

// latchJSON is the --json form of a latch run.
type latchJSON struct {
	Scenario string    `json:"scenario"`
	Backend  string    `json:"backend"`
	Seed     uint64    `json:"seed"`
	Workers  int       `json:"workers"`
	Waiters  int       `json:"waiters"`
	Downs    []float64 `json:"count_downs_s"` // when each worker counted down, s from the start
	Released []float64 `json:"released_s"`    // when each waiter went on
	Early    int       `json:"released_early"`
	Final    int64     `json:"count_at_end"`
	OK       bool      `json:"ok"`
}

func (d *latchDemo) run(ctx context.Context, e *env) error {
	clients, err := newClients(e.be.rdb, d.workers+d.waiters)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	name := e.key("latch")
	defer e.be.rdb.Del(context.WithoutCancel(ctx), name) // a latch left set never expires
	latch := clients[0].CountDownLatch(name)
	if _, err := latch.TrySetCount(ctx, int64(d.workers)); err != nil {
		return err
	}
	e.logf("latch: %d workers count down a latch set to %d; %d waiters on other instances Await it; seed %d, against %s",
		d.workers, d.workers, d.waiters, e.opts.seed, e.backendDesc())

	epoch := time.Now()
	var done atomic.Int64 // count-downs confirmed so far
	res := latchJSON{Scenario: "latch", Backend: e.backendDesc(), Seed: e.opts.seed, Workers: d.workers, Waiters: d.waiters,
		Downs: make([]float64, d.workers), Released: make([]float64, d.waiters)}
	early := make([]bool, d.waiters)
	errs := make([]error, d.workers+d.waiters)
	var wg sync.WaitGroup
	for i := range d.waiters {
		l := clients[d.workers+i].CountDownLatch(name)
		wg.Go(func() {
			errs[d.workers+i] = l.Await(ctx)
			res.Released[i] = time.Since(epoch).Seconds()
			early[i] = done.Load() < int64(d.workers)
		})
	}
	for i := range d.workers {
		l := clients[i].CountDownLatch(name)
		rng := rand.New(rand.NewPCG(e.opts.seed, uint64(i)))
		wg.Go(func() {
			sleep(ctx, time.Duration(20+rng.IntN(181))*time.Millisecond)
			// Counted and timed before the call: a waiter released by this
			// count-down must neither see it missing nor be printed ahead
			// of it.
			done.Add(1)
			res.Downs[i] = time.Since(epoch).Seconds()
			errs[i] = l.CountDown(ctx)
		})
	}
	wg.Wait()
	if err := firstErr(errs...); err != nil {
		return err
	}
	for _, b := range early {
		if b {
			res.Early++
		}
	}
	if res.Final, err = latch.Count(ctx); err != nil {
		return err
	}
	res.OK = res.Early == 0 && res.Final == 0
	if err := e.result(res, func(w io.Writer) { res.print(w) }); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("%d waiters went on before the last count-down; count at the end %d", res.Early, res.Final)
	}
	return nil
}

func (r latchJSON) print(w io.Writer) {
	type line struct {
		at   float64
		text string
	}
	var lines []line
	last := 0.0
	for i, at := range r.Downs {
		lines = append(lines, line{at, fmt.Sprintf("worker %d counts down", i+1)})
		last = max(last, at)
	}
	for i, at := range r.Released {
		lines = append(lines, line{at, fmt.Sprintf("waiter %d goes on", i+1)})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.at, b.at) })
	for _, l := range lines {
		fmt.Fprintf(w, "  %5.3fs  %s\n", l.at, l.text)
	}
	fmt.Fprintf(w, "count at the end: %d\n", r.Final)
	fmt.Fprintf(w, "waiters held until the last count-down: %s (%d of %d went on early; last count-down at %.3fs)\n",
		verdict(r.OK), r.Early, r.Waiters, last)
}
