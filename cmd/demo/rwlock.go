package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/lockactor/lockactor"
)

var rwlockCommand = command{
	name:    "rwlock",
	summary: "readers share the lock in parallel, a writer holds it alone",
	doc: "--readers and --writers owners, each on its own instance, loop for\n" +
		"--duration on one ReadWriteLock: readers hold the read lock for 30-90 ms,\n" +
		"writers the write lock for 50 ms, with random pauses (--seed) between.\n" +
		"Prints how many readers were inside at once over time and checks, from\n" +
		"the logged holds, that no write hold overlapped any other hold.",
	common:   flagRedis | flagDuration | flagSeed | flagTimeline,
	duration: 3 * time.Second,
	new:      func() scenario { return new(rwDemo) },
}

// rwDemo is the rwlock scenario and its flags.
type rwDemo struct {
	readers, writers int
}

func (d *rwDemo) define(fs *flag.FlagSet) {
	fs.IntVar(&d.readers, "readers", 4, "reader owners, each on its own instance")
	fs.IntVar(&d.writers, "writers", 1, "writer owners, each on its own instance")
}

func (d *rwDemo) check(*options) error {
	return firstErr(atLeast("readers", d.readers, 1), atLeast("writers", d.writers, 1))
}

// rwSpan is one hold: asked when Lock was called, start when it returned,
// end before Unlock.
type rwSpan struct {
	owner             int
	write             bool
	asked, start, end time.Duration
}

// rwColumns is how many snapshots the concurrency strip shows.
const rwColumns = 60

// rwJSON is the --json form of an rwlock run.
type rwJSON struct {
	Scenario      string   `json:"scenario"`
	Backend       string   `json:"backend"`
	Seed          uint64   `json:"seed"`
	Readers       int      `json:"readers"`
	Writers       int      `json:"writers"`
	ReadHolds     int      `json:"read_holds"`
	WriteHolds    int      `json:"write_holds"`
	MaxReaders    int      `json:"max_readers_at_once"`
	WriteOverlaps int      `json:"write_overlaps"`
	SampleEvery   float64  `json:"sample_every_seconds"`
	Samples       []sample `json:"over_time"`
	OK            bool     `json:"ok"`
}

func (d *rwDemo) run(ctx context.Context, e *env) error {
	n := d.readers + d.writers
	clients, err := newClients(e.be.rdb, n)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	name := e.key("lock")
	e.logf("rwlock: %d reader(s) and %d writer(s) on %d instances for %v, seed %d, against %s",
		d.readers, d.writers, n, e.opts.duration, e.opts.seed, e.backendDesc())

	runCtx, cancel := context.WithTimeout(ctx, e.opts.duration)
	defer cancel()
	epoch := time.Now()
	logs := make([][]rwSpan, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range clients {
		rng := rand.New(rand.NewPCG(e.opts.seed, uint64(i)))
		wg.Go(func() { logs[i], errs[i] = rwOwner(runCtx, c.ReadWriteLock(name), i, i >= d.readers, rng, epoch) })
	}
	wg.Wait()
	elapsed := time.Since(epoch)
	if err := firstErr(errs...); err != nil {
		return err
	}

	var all []rwSpan
	for _, l := range logs {
		all = append(all, l...)
	}
	res := rwJSON{Scenario: "rwlock", Backend: e.backendDesc(), Seed: e.opts.seed, Readers: d.readers, Writers: d.writers,
		SampleEvery: seconds(elapsed / rwColumns)}
	var holds, reads []interval
	for _, s := range all {
		h := interval{asked: s.asked, start: s.start, end: s.end, exclusive: s.write}
		holds = append(holds, h)
		if s.write {
			res.WriteHolds++
		} else {
			res.ReadHolds++
			reads = append(reads, h)
		}
	}
	res.WriteOverlaps = writeOverlaps(all)
	res.MaxReaders = maxInside(reads)
	res.Samples = samples(holds, elapsed, rwColumns)
	res.OK = res.WriteOverlaps == 0 && res.WriteHolds > 0
	if err := e.saveTimeline(d.timeline(all, elapsed)); err != nil {
		return err
	}
	if err := e.result(res, func(w io.Writer) { res.print(w) }); err != nil {
		return err
	}
	switch {
	case res.WriteOverlaps > 0:
		return fmt.Errorf("%d write holds overlapped another hold", res.WriteOverlaps)
	case res.WriteHolds == 0:
		return fmt.Errorf("no writer got the lock in %v", e.opts.duration)
	}
	return nil
}

// rwOwner loops one owner until ctx ends and returns its holds.
func rwOwner(ctx context.Context, rw *lockactor.ReadWriteLock, id int, write bool, rng *rand.Rand, epoch time.Time) ([]rwSpan, error) {
	l, hold := rw.ReadLock(), func() time.Duration { return time.Duration(30+rng.IntN(61)) * time.Millisecond }
	pause := func() time.Duration { return time.Duration(20+rng.IntN(100)) * time.Millisecond }
	if write {
		l, hold = rw.WriteLock(), func() time.Duration { return 50 * time.Millisecond }
		pause = func() time.Duration { return time.Duration(100+rng.IntN(150)) * time.Millisecond }
	}
	var log []rwSpan
	for sleep(ctx, pause()); ctx.Err() == nil; sleep(ctx, pause()) {
		asked := time.Since(epoch)
		if err := l.Lock(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			return log, err
		}
		start := time.Since(epoch)
		time.Sleep(hold())
		log = append(log, rwSpan{owner: id, write: write, asked: asked, start: start, end: time.Since(epoch)})
		if err := unlockFor(ctx, l); err != nil {
			return log, err
		}
	}
	return log, nil
}

// writeOverlaps counts write holds that overlap any other hold.
func writeOverlaps(all []rwSpan) int {
	n := 0
	for i, w := range all {
		if !w.write {
			continue
		}
		for j, s := range all {
			if i != j && s.start < w.end && w.start < s.end {
				n++
				break
			}
		}
	}
	return n
}

func (r rwJSON) print(w io.Writer) {
	var readers, writers strings.Builder
	for _, s := range r.Samples {
		readers.WriteString(count(s.Inside))
		writers.WriteString(map[bool]string{true: "W", false: "·"}[s.Exclusive > 0])
		if s.Exclusive > 1 {
			writers.WriteString("!")
		}
	}
	fmt.Fprintf(w, "who is inside, one snapshot every %v:\n", time.Duration(r.SampleEvery*float64(time.Second)).Round(time.Millisecond))
	fmt.Fprintf(w, "  readers  %s\n  writer   %s\n", &readers, &writers)
	fmt.Fprintf(w, "holds: %d read, %d write\n", r.ReadHolds, r.WriteHolds)
	fmt.Fprintf(w, "readers in parallel: up to %d at once\n", r.MaxReaders)
	fmt.Fprintf(w, "writer alone: %s (%d of %d write holds overlapped another hold)\n", verdict(r.OK), r.WriteOverlaps, r.WriteHolds)
}

// count is n as one character: '·' for 0, '+' above 9.
func count(n int) string {
	switch {
	case n == 0:
		return "·"
	case n > 9:
		return "+"
	}
	return fmt.Sprint(n)
}

// timeline draws the lock's lane (reads shared, writes exclusive) and one
// row per owner.
func (d *rwDemo) timeline(all []rwSpan, total time.Duration) *timeline {
	tl := &timeline{Title: "read-write lock", Total: total,
		Subtitle: fmt.Sprintf("%d reader(s) (green holds may overlap: darker where they do) and %d writer(s) (blue holds must be alone)", d.readers, d.writers)}
	lane := tlRow{Label: "the lock: all holds", Lane: true}
	rows := make([]tlRow, d.readers+d.writers)
	for i := range rows {
		rows[i].Label = fmt.Sprintf("reader %d", i+1)
		if i >= d.readers {
			rows[i].Label = fmt.Sprintf("writer %d", i-d.readers+1)
		}
	}
	for _, s := range all {
		kind := spanShared
		if s.write {
			kind = spanHold
		}
		lane.Spans = append(lane.Spans, tlSpan{Start: s.start, End: s.end, Kind: kind, Note: rows[s.owner].Label})
		rows[s.owner].Spans = append(rows[s.owner].Spans,
			tlSpan{Start: s.asked, End: s.start, Kind: spanWait, Note: "waits"},
			tlSpan{Start: s.start, End: s.end, Kind: kind, Note: "holds"})
	}
	tl.Rows = append([]tlRow{lane}, rows...)
	return tl
}
