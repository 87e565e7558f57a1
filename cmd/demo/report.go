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
	elapsed     time.Duration
	sections    int             // critical sections run (= successful acquisitions)
	waits       []time.Duration // sorted
	perWorker   []int           // acquisitions per worker, by worker id
	perProc     []int           // acquisitions per instance
	lost        int             // holds whose Lost channel closed before Unlock
	doubles     int64           // entries that found another worker inside
	overlaps    int             // overlapping pairs found in the span logs
	example     string          // the first overlap, described; "" when none
	commands    int64           // Redis commands sent during the run
	interrupted bool            // Ctrl-C ended the run
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
		log := keyLog(workers, k)
		n, prev, next := overlaps(log)
		if n > 0 && r.example == "" {
			r.example = fmt.Sprintf("%s: %s held [%v, %v], %s entered at %v", name,
				workers[prev.owner].name, prev.start, prev.end, workers[next.owner].name, next.start)
		}
		r.overlaps += n
	}
	return r
}

// keyLog is every worker's spans on lock k.
func keyLog(workers []*worker, k int) []span {
	var log []span
	for _, w := range workers {
		log = append(log, w.spans[k]...)
	}
	return log
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

// rate is acquisitions per second.
func (r results) rate() float64 { return float64(r.sections) / r.elapsed.Seconds() }

// commandsPerAcquisition is Redis commands per acquisition (lock, unlock,
// renewals: everything but pub/sub); 0 when nothing was acquired.
func (r results) commandsPerAcquisition() float64 {
	if r.sections == 0 {
		return 0
	}
	return float64(r.commands) / float64(r.sections)
}

// print writes the summary table and the verdict line.
func (r results) print(w io.Writer, c *contention, e *env) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "backend\t%s\n", e.backendDesc())
	fmt.Fprintf(tw, "setup\t%d instances x %d goroutines, %d locks, hold %v, seed %d\n",
		c.procs, c.goroutines, c.keys, c.hold, e.opts.seed)
	ran := r.elapsed.Round(time.Millisecond).String()
	if r.interrupted {
		ran += " (interrupted)"
	}
	fmt.Fprintf(tw, "ran\t%s\n", ran)
	fmt.Fprintf(tw, "acquisitions\t%d total, %.1f/s\n", r.sections, r.rate())
	fmt.Fprintf(tw, "wait\tp50 %s  p99 %s  max %s\n",
		ms(percentile(r.waits, 0.50)), ms(percentile(r.waits, 0.99)), ms(percentile(r.waits, 1)))
	fmt.Fprintf(tw, "redis commands\t%d, %.2f per acquisition (all sent: lock, unlock, renewals; a script is one; pub/sub not counted)\n",
		r.commands, r.commandsPerAcquisition())
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

// contentionJSON is the --json form of a contention run.
type contentionJSON struct {
	Scenario       string  `json:"scenario"`
	Backend        string  `json:"backend"`
	Procs          int     `json:"procs"`
	Goroutines     int     `json:"goroutines"`
	Keys           int     `json:"keys"`
	HoldSeconds    float64 `json:"hold_seconds"`
	Seed           uint64  `json:"seed"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Interrupted    bool    `json:"interrupted"`
	Acquisitions   int     `json:"acquisitions"`
	PerSecond      float64 `json:"acquisitions_per_second"`
	WaitP50        float64 `json:"wait_p50_seconds"`
	WaitP99        float64 `json:"wait_p99_seconds"`
	WaitMax        float64 `json:"wait_max_seconds"`
	Commands       int64   `json:"redis_commands"`
	CommandsPerAcq float64 `json:"redis_commands_per_acquisition"`
	PerGoroutine   []int   `json:"acquisitions_per_goroutine"`
	PerInstance    []int   `json:"acquisitions_per_instance"`
	Lost           int     `json:"lost_locks"`
	DoubleEntries  int64   `json:"double_entries"`
	Overlaps       int     `json:"overlaps"`
	FirstOverlap   string  `json:"first_overlap,omitempty"`
	OK             bool    `json:"ok"`
}

func (r results) jsonResult(c *contention, e *env) contentionJSON {
	return contentionJSON{
		Scenario: "contention", Backend: e.backendDesc(),
		Procs: c.procs, Goroutines: c.goroutines, Keys: c.keys, HoldSeconds: seconds(c.hold), Seed: e.opts.seed,
		ElapsedSeconds: seconds(r.elapsed), Interrupted: r.interrupted,
		Acquisitions: r.sections, PerSecond: r.rate(),
		WaitP50: seconds(percentile(r.waits, 0.5)), WaitP99: seconds(percentile(r.waits, 0.99)), WaitMax: seconds(percentile(r.waits, 1)),
		Commands: r.commands, CommandsPerAcq: r.commandsPerAcquisition(),
		PerGoroutine: r.perWorker, PerInstance: r.perProc, Lost: r.lost,
		DoubleEntries: r.doubles, Overlaps: r.overlaps, FirstOverlap: r.example, OK: !r.violated(),
	}
}

// timeline draws one lane per lock name (every holder's holds: overlaps
// would show in red) and one row per worker (its waits and holds).
func (r results) timeline(c *contention, workers []*worker, names []string) *timeline {
	tl := &timeline{
		Title: "contention",
		Subtitle: fmt.Sprintf("%d instances x %d goroutines on %d locks, hold %v: %d critical sections, %d overlaps",
			c.procs, c.goroutines, c.keys, c.hold, r.sections, r.overlaps),
		Total: r.elapsed,
	}
	for k := range names {
		row := tlRow{Label: fmt.Sprintf("lock %d: all holds", k), Lane: true}
		for _, s := range keyLog(workers, k) {
			row.Spans = append(row.Spans, tlSpan{Start: s.start, End: s.end, Kind: spanHold, Note: workers[s.owner].name})
		}
		tl.Rows = append(tl.Rows, row)
	}
	for _, w := range workers {
		row := tlRow{Label: w.name}
		for k := range names {
			for _, s := range w.spans[k] {
				note := fmt.Sprintf("lock %d", k)
				row.Spans = append(row.Spans,
					tlSpan{Start: s.asked, End: s.start, Kind: spanWait, Note: note},
					tlSpan{Start: s.start, End: s.end, Kind: spanHold, Note: note})
			}
		}
		tl.Rows = append(tl.Rows, row)
	}
	return tl
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

// ratio formats hi/lo as " (max/min 1.23)", or "" when lo is 0.
func ratio(lo, hi int) string {
	if lo == 0 {
		return ""
	}
	return fmt.Sprintf(" (max/min %.2f)", float64(hi)/float64(lo))
}
