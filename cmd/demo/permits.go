package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lockactor/lockactor"
)

var permitsCommand = command{
	name:    "permits",
	summary: "a crashed holder's permits come back when their leases end",
	doc: "A PermitSemaphore gets --permits permits. Instance C takes them all with a\n" +
		"--lease lease and crashes (its Client is closed without Release). Workers\n" +
		"on instance B wait in Acquire: nobody releases, yet each gets a permit once\n" +
		"the leases end, because Redis ends them. A late Release of a dead permit\n" +
		"is ErrNotHeld. (A Semaphore's permits would never come back.)",
	common: flagRedis,
	new:    func() scenario { return new(permitsDemo) },
}

// permitsDemo is the permits scenario and its flags.
type permitsDemo struct {
	permits int
	lease   time.Duration
}

func (d *permitsDemo) define(fs *flag.FlagSet) {
	fs.IntVar(&d.permits, "permits", 3, "permits of the semaphore")
	fs.DurationVar(&d.lease, "lease", time.Second, "lease of the crashed holder's permits")
}

func (d *permitsDemo) check(*options) error {
	return firstErr(atLeast("permits", d.permits, 1), positiveDur("lease", d.lease))
}

// permitsJSON is the --json form of a permits run.
type permitsJSON struct {
	Scenario    string    `json:"scenario"`
	Backend     string    `json:"backend"`
	Permits     int       `json:"permits"`
	Lease       float64   `json:"lease_seconds"`
	BackAfter   []float64 `json:"back_after_crash_seconds"`
	LateNotHeld bool      `json:"late_release_not_held"`
	Available   int       `json:"available_at_end"`
	OK          bool      `json:"ok"`
}

// permitsSlack is how late after its lease a permit may come back: the
// waiters retry at the earliest deadline the refusal reported.
const permitsSlack = 500 * time.Millisecond

func (d *permitsDemo) run(ctx context.Context, e *env) error {
	clients, err := newClients(e.be.rdb, 2)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	crashed, b := clients[0], clients[1]
	name := e.key("permits")
	// Neither key of a permit semaphore expires: remove them when done.
	defer e.be.rdb.Del(context.WithoutCancel(ctx), name, "{"+name+"}:timeout")
	sem := b.PermitSemaphore(name)
	if _, err := sem.TrySetPermits(ctx, d.permits); err != nil {
		return err
	}
	e.logf("permits: %d permits, instance C takes them all for a %v lease and crashes, against %s",
		d.permits, d.lease, e.backendDesc())
	doomed := crashed.PermitSemaphore(name)
	ids := make([]string, d.permits)
	for i := range ids {
		if ids[i], err = doomed.Acquire(ctx, d.lease); err != nil {
			return err
		}
	}
	e.eventf("instance C: Acquire x%d -> ids %s...", d.permits, ids[0][:8])
	_ = crashed.Close()
	crashedAt := time.Now()
	e.eventf("instance C: crashes (Client.Close, no Release)")
	if _, ok, err := sem.TryAcquire(ctx, time.Minute, 0); ok || err != nil {
		return fmt.Errorf("TryAcquire right after the crash = %v, %v; want none available", ok, err)
	}
	e.eventf("instance B: TryAcquire -> none available")

	res := permitsJSON{Scenario: "permits", Backend: e.backendDesc(), Permits: d.permits, Lease: seconds(d.lease)}
	wctx, cancel := context.WithTimeout(ctx, d.lease+5*time.Second)
	defer cancel()
	back := make([]time.Duration, d.permits)
	errs := make([]error, d.permits)
	var wg sync.WaitGroup
	for i := range d.permits {
		wg.Go(func() {
			var id string
			if id, errs[i] = sem.Acquire(wctx, time.Minute); errs[i] == nil {
				back[i] = time.Since(crashedAt)
				errs[i] = sem.Release(ctx, id)
			}
		})
	}
	wg.Wait()
	if err := firstErr(errs...); err != nil {
		return fmt.Errorf("the crashed holder's permits did not come back: %w", err)
	}
	ok := true
	for i, t := range back {
		res.BackAfter = append(res.BackAfter, seconds(t))
		e.eventf("instance B: worker %d: Acquire -> permit, %v after the crash", i, t.Round(time.Millisecond))
		ok = ok && t <= d.lease+permitsSlack
	}
	err = sem.Release(ctx, ids[0])
	res.LateNotHeld = errors.Is(err, lockactor.ErrNotHeld)
	e.eventf("instance B: Release of C's permit %s... -> %v", ids[0][:8], err)
	if res.Available, err = sem.AvailablePermits(ctx); err != nil {
		return err
	}
	res.OK = ok && res.LateNotHeld && res.Available == d.permits
	if err := e.result(res, func(w io.Writer) { res.print(w, d.lease) }); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("permits back after %v (lease %v), late release not held: %v, %d of %d available at the end",
			res.BackAfter, d.lease, res.LateNotHeld, res.Available, d.permits)
	}
	return nil
}

func (r permitsJSON) print(w io.Writer, lease time.Duration) {
	last := 0.0
	for _, t := range r.BackAfter {
		last = max(last, t)
	}
	fmt.Fprintf(w, "crashed holder's permits back: %d of %d, the last %.2fs after the crash (lease %v)\n",
		len(r.BackAfter), r.Permits, last, lease)
	fmt.Fprintf(w, "late release of a dead permit: %s\n", map[bool]string{true: "ErrNotHeld", false: "accepted (wrong)"}[r.LateNotHeld])
	fmt.Fprintf(w, "permits back at the end: %d of %d\n", r.Available, r.Permits)
	fmt.Fprintf(w, "leases enforced by Redis: %s\n", verdict(r.OK))
}
