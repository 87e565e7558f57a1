package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// handoffRun is how many local hand-offs a lockactor run makes at most
// before other processes get their turn (see lockactor.WithRelay).
const handoffRun = 64

// target is one of the targets set for lockactor, checked on its medians.
type target struct {
	Config   string `json:"config"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      string `json:"met"` // "yes", "no" or "not run"
}

// checkTargets evaluates the targets on lockactor's medians: the four
// scenarios against raw and the other libraries, replica sync against none
// (when the run has replicas), and the scale and frozen checks.
func (r *report) checkTargets() []target {
	s := r.Settings
	var out []target
	get := func(title, lib, key string) (float64, bool) {
		v, ok := r.Medians[title][lib][key]
		return v, ok
	}
	add := func(title, what string, ok bool, measured string, met bool) {
		t := target{Config: title, Target: what, Measured: measured, Met: "no"}
		switch {
		case !ok:
			t.Met, t.Measured = "not run", "-"
		case met:
			t.Met = "yes"
		}
		out = append(out, t)
	}
	vsRaw := func(title, what string, want float64) {
		la, ok1 := get(title, "lockactor", "acq_s")
		raw, ok2 := get(title, "raw", "acq_s")
		ok := ok1 && ok2 && raw > 0
		add(title, what, ok, fmt.Sprintf("%.2fx (%s vs %s)", div(la, raw), kilo(la), kilo(raw)), ok && la/raw >= want)
	}
	atMost := func(title, lib, key, what string, limit float64) {
		v, ok := get(title, lib, key)
		add(title, what, ok, strconv.FormatFloat(v, 'f', 2, 64), v <= limit)
	}

	vsLib := func(title, what, lib string, want float64) {
		la, ok1 := get(title, "lockactor", "acq_s")
		other, ok2 := get(title, lib, "acq_s")
		ok := ok1 && ok2 && other > 0
		add(title, what, ok, fmt.Sprintf("%.2fx (%s vs %s)", div(la, other), kilo(la), kilo(other)), ok && la/other >= want)
	}

	// The targets depend on the deployment: on loopback, sharing the
	// CPUs with redis-server (the default), or on a realistic one (--pin
	// and --latency: Redis on its own CPU, a same-zone network).
	realistic := s.Pin && s.Latency > 0
	pick := func(loopback, real float64) float64 {
		if realistic {
			return real
		}
		return loopback
	}
	x := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) + "x" }

	un := titleUncontended()
	vsRaw(un, "pairs/s >= "+x(pick(0.8, 1.0))+" raw", pick(0.8, 1.0))
	if realistic {
		vsLib(un, "pairs/s >= redislock", "redislock", 1.0)
	}

	c0 := titleContended(256, 0)
	vsRaw(c0, "acq/s >= "+x(pick(4, 10))+" raw", pick(4, 10))
	atMost(c0, "lockactor", "fair", "fairness max/min <= 1.5", 1.5)
	atMost(c0, "lockactor", "starved", "no owner starved", 0)

	mp := titleMultiproc(s.Procs, s.ProcG, 0)
	vsRaw(mp, "acq/s >= 5x raw", 5)
	atMost(mp, "lockactor", "proc_fair", "process max/min <= 2", 2)
	atMost(mp, "lockactor", "starved", "no owner starved", 0)
	if s.Peer {
		atMost(mp, "lockactor", "peer_grants_max", fmt.Sprintf("the peer waits through at most one run (%d grants)", handoffRun), handoffRun)
	}

	mk := titleManykeys(s.KeysG, s.Keys)
	vsRaw(mk, "acq/s >= "+x(pick(2, 4))+" raw", pick(2, 4))

	if s.Replicas > 0 { // replica sync on (lockactor) against off (lockactor-nosync)
		for _, title := range []string{c0, mk} {
			la, ok1 := get(title, "lockactor", "acq_s")
			off, ok2 := get(title, "lockactor-nosync", "acq_s")
			ok := ok1 && ok2 && off > 0
			add(title, "replica sync on >= 0.7x of off", ok,
				fmt.Sprintf("%.2fx (%s vs %s)", div(la, off), kilo(la), kilo(off)), ok && la/off >= 0.7)
		}
	}

	atMost(titleWaiters(s.Scale.Waiters), "lockactor", "heap_per_waiter", "heap per waiter <= 1 KiB", 1024)
	names := titleNames(s.Scale.Names)
	before, ok1 := get(names, "lockactor", "gor_before")
	after, ok2 := get(names, "lockactor", "gor_after")
	add(names, "idle names reclaimed: goroutines back to baseline", ok1 && ok2,
		fmt.Sprintf("%.0f -> %.0f", before, after), after <= before)
	atMost(titleHeld(s.Scale.Held), "lockactor", "rt_per_100", "renewal <= 1 round trip per 100 locks per period", 1)

	fz := titleFrozen(s.Frozen)
	fzRatio, ok1 := get(fz, "lockactor", "ratio")
	fzBase, _ := get(fz, "lockactor", "base_acq_s")
	fzDuring, _ := get(fz, "lockactor", "frozen_acq_s")
	add(fz, "names on the other masters keep >= 0.8x their throughput", ok1,
		fmt.Sprintf("%.2fx (%s -> %s acq/s)", fzRatio, kilo(fzBase), kilo(fzDuring)), fzRatio >= 0.8)
	atMost(fz, "lockactor", "lost_healthy", "no Lost on the other masters", 0)

	var overlaps float64
	seen := false
	for _, libs := range r.Medians {
		if m, ok := libs["lockactor"]; ok {
			overlaps += m["violations"] + m["lost"]
			seen = true
		}
	}
	add("all tables", "mutual exclusion: no overlaps, no lost holds", seen, strconv.FormatFloat(overlaps, 'f', 0, 64), overlaps == 0)
	return out
}

// writeTargets prints the targets table.
func (r *report) writeTargets(w io.Writer) error {
	_, err := fmt.Fprintf(w, "### Targets, lockactor medians\n\n| config | target | measured | met |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Config, t.Target, t.Measured, t.Met)
	}
	return err
}

func parseInts(csv string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(csv, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseDurations(csv string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(csv, ",") {
		f = strings.TrimSpace(f)
		if f == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bad duration %q", f)
		}
		out = append(out, d)
	}
	return out, nil
}
