package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// results is what a contention run measured.
type results struct {
	elapsed   time.Duration
	sections  int             // critical sections run (= successful acquisitions)
	waits     []time.Duration // sorted
	perWorker []int           // acquisitions per worker, by worker id
	perProc   []int           // acquisitions per instance
	lost      int             // holds whose Lost channel closed before Unlock
	doubles   int64           // entries that found another worker inside
	overlaps  int             // overlapping pairs found in the span logs
	example   string          // the first overlap, described; "" when none
}

// collect merges the workers' logs, per lock name, and checks them.
func collect(workers []*worker, names []string, a *arena, elapsed time.Duration) results {
	r := results{
		elapsed:   elapsed,
		doubles:   a.doubles.Load(),
		perWorker: make([]int, len(workers)),
		perProc:   make([]int, workers[len(workers)-1].proc+1), // workers are ordered by instance
	}
	for _, w := range workers {
		r.waits = append(r.waits, w.waits...)
		r.perWorker[w.id] = len(w.waits)
		r.perProc[w.proc] += len(w.waits)
		r.lost += w.lost
	}
	slices.Sort(r.waits)
	r.sections = len(r.waits)

	for k, name := range names {
		var log []span
		for _, w := range workers {
			log = append(log, w.spans[k]...)
		}
		n, prev, next := overlaps(log)
		if n > 0 && r.example == "" {
			r.example = fmt.Sprintf("%s: %s held [%v, %v], %s entered at %v", name,
				workers[prev.owner].name, prev.start, prev.end, workers[next.owner].name, next.start)
		}
		r.overlaps += n
	}
	return r
}

// overlaps sorts log by start and counts the spans that start before an
// earlier span has ended; it also returns the first such pair.
func overlaps(log []span) (n int, prev, next span) {
	slices.SortFunc(log, func(x, y span) int { return cmp.Compare(x.start, y.start) })
	var open span // the span reaching furthest right so far
	for i, s := range log {
		if i > 0 && s.start < open.end {
			if n == 0 {
				prev, next = open, s
			}
			n++
		}
		if i == 0 || s.end > open.end {
			open = s
		}
	}
	return n, prev, next
}

// violated reports whether two owners were ever inside one critical section.
func (r results) violated() bool { return r.overlaps > 0 || r.doubles > 0 }

// print writes the summary table and the verdict line.
func (r results) print(w io.Writer, e *env, interrupted bool) {
	cfg := e.cfg
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "backend\t%s\n", e.backend)
	fmt.Fprintf(tw, "setup\t%d instances x %d goroutines, %d locks, hold %v, seed %d\n",
		cfg.procs, cfg.goroutines, cfg.keys, cfg.hold, cfg.seed)
	ran := r.elapsed.Round(time.Millisecond).String()
	if interrupted {
		ran += " (interrupted)"
	}
	fmt.Fprintf(tw, "ran\t%s\n", ran)
	fmt.Fprintf(tw, "acquisitions\t%d total, %.1f/s\n", r.sections, float64(r.sections)/r.elapsed.Seconds())
	fmt.Fprintf(tw, "wait\tp50 %s  p99 %s  max %s\n",
		ms(percentile(r.waits, 0.50)), ms(percentile(r.waits, 0.99)), ms(percentile(r.waits, 1)))
	lo, hi := slices.Min(r.perWorker), slices.Max(r.perWorker)
	fmt.Fprintf(tw, "fairness\tper goroutine min %d, max %d%s\n", lo, hi, ratio(lo, hi))
	fmt.Fprintf(tw, "per instance\t%v\n", r.perProc)
	fmt.Fprintf(tw, "lost locks\t%d\n", r.lost)
	fmt.Fprintf(tw, "double entries\t%d\n", r.doubles)
	_ = tw.Flush()

	if !r.violated() {
		fmt.Fprintf(w, "mutual exclusion: OK (0 overlaps in %d critical sections)\n", r.sections)
		return
	}
	fmt.Fprintf(w, "mutual exclusion: VIOLATED (%d overlaps in %d critical sections, %d double entries)\n",
		r.overlaps, r.sections, r.doubles)
	if r.example != "" {
		fmt.Fprintf(w, "  first overlap: %s\n", r.example)
	}
}

// percentile is the nearest-rank p-quantile (0 < p <= 1) of sorted; 0 when
// sorted is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ms formats d in milliseconds with two decimals.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// ratio formats hi/lo as " (max/min 1.23)", or "" when lo is 0.
func ratio(lo, hi int) string {
	if lo == 0 {
		return ""
	}
	return fmt.Sprintf(" (max/min %.2f)", float64(hi)/float64(lo))
}
