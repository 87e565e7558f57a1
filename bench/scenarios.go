package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// config is one table of the report: one scenario with fixed parameters,
// measured for each of its libraries in every round.
type config struct {
	Scenario string
	Title    string
	Libs     []libSpec
	run      func(ls libSpec) (map[string]float64, string, error)
}

// sample is one library's measurement in one round of one config.
type sample struct {
	Title   string             `json:"config"`
	Lib     string             `json:"lib"`
	Round   int                `json:"round"`
	Metrics map[string]float64 `json:"metrics"`
	Err     string             `json:"error,omitempty"`     // the run failed
	Note    string             `json:"first_err,omitempty"` // first Lock/Unlock error of a run that went on
}

// Titles, shared by the tables and the targets.
func titleUncontended() string { return "uncontended: 1 owner, own key" }
func titleContended(g int, cs time.Duration) string {
	return fmt.Sprintf("contended: G=%d on one key, C=%v", g, cs)
}
func titleMultiproc(p, g int, cs time.Duration) string {
	return fmt.Sprintf("multiproc: %d processes x %d goroutines on one key, C=%v", p, g, cs)
}
func titleManykeys(g, k int) string { return fmt.Sprintf("manykeys: %d goroutines over %d keys", g, k) }
func titleWaiters(n int) string     { return fmt.Sprintf("scale: %d goroutines waiting on one lock", n) }
func titleNames(n int) string       { return fmt.Sprintf("scale: %d distinct names locked once each", n) }
func titleHeld(n int) string {
	return fmt.Sprintf("scale: %d locks held at once under the watchdog", n)
}

// buildConfigs turns the settings into the list of tables to measure.
func buildConfigs(srv *server, s settings) ([]config, error) {
	libs, err := pickLibs(allLibs(s.Tuning), s.Libs)
	if err != nil {
		return nil, err
	}
	gs, err := parseInts(s.Goroutines)
	if err != nil {
		return nil, err
	}
	css, err := parseDurations(s.CS)
	if err != nil {
		return nil, err
	}
	pcss, err := parseDurations(s.ProcCS)
	if err != nil {
		return nil, err
	}
	seq := 0
	load := func(scn, title string, g, keys int, cs time.Duration, procs int) config {
		base := loadSpec{Scenario: scn, Addr: srv.addr, NKeys: keys, Goroutines: g, CS: cs, Duration: s.Duration, PoolSize: s.PoolSize, Latency: s.Latency, Tuning: s.Tuning,
			Peer: procs > 1 && s.Peer, PeerJava: s.PeerStyle == "java"}
		return config{Scenario: scn, Title: title, Libs: libs, run: func(ls libSpec) (map[string]float64, string, error) {
			seq++
			spec := base
			spec.Lib, spec.Prefix = ls.Name, fmt.Sprintf("bench:%d:", seq)
			// The peer speaks Redisson's layout: beside redsync's or
			// redislock's keys it would only read WRONGTYPE.
			spec.Peer = spec.Peer && (ls.Name == "raw" || strings.HasPrefix(ls.Name, "lockactor"))
			var res loadResult
			var err error
			if procs > 1 {
				res, err = runMultiproc(srv, spec, procs)
			} else {
				res, err = runInProcess(srv, spec, ls)
			}
			return loadMetrics(res), res.FirstErr, err
		}}
	}
	var out []config
	for _, scn := range strings.Split(s.Scenarios, ",") {
		switch strings.TrimSpace(scn) {
		case "uncontended":
			out = append(out, load(scn, titleUncontended(), 1, 1, 0, 1))
		case "contended":
			for _, g := range gs {
				for _, cs := range css {
					out = append(out, load(scn, titleContended(g, cs), g, 1, cs, 1))
				}
			}
		case "multiproc":
			for _, cs := range pcss {
				out = append(out, load(scn, titleMultiproc(s.Procs, s.ProcG, cs), s.ProcG, 1, cs, s.Procs))
			}
		case "manykeys":
			out = append(out, load(scn, titleManykeys(s.KeysG, s.Keys), s.KeysG, s.Keys, 0, 1))
		case "scale":
			out = append(out, scaleConfigs(srv, s, libs, &seq)...)
		case "frozen":
			out = append(out, frozenConfigs(srv, s, libs)...)
		default:
			return nil, fmt.Errorf("unknown scenario %q (have %s)", scn, allScenarios)
		}
	}
	return out, nil
}

func scaleConfigs(srv *server, s settings, libs []libSpec, seq *int) []config {
	var sl []libSpec
	for _, l := range libs {
		if slices.Contains(scaleLibs, l.Name) {
			sl = append(sl, l)
		}
	}
	mk := func(title string, f func(*server, scaleSpec, string) (map[string]float64, error)) config {
		return config{Scenario: "scale", Title: title, Libs: sl, run: func(ls libSpec) (map[string]float64, string, error) {
			*seq++
			sp := s.Scale
			sp.PoolSize, sp.Latency, sp.Prefix = s.PoolSize, s.Latency, fmt.Sprintf("bench:%d:", *seq)
			m, err := f(srv, sp, ls.Name)
			return m, "", err
		}}
	}
	return []config{
		mk(titleWaiters(s.Scale.Waiters), scaleWaiters),
		mk(titleNames(s.Scale.Names), scaleNames),
		mk(titleHeld(s.Scale.Held), scaleHeld),
	}
}

// measure runs every config for every round, libraries alternating.
func measure(srv *server, s settings, progress io.Writer) (*report, error) {
	cfgs, err := buildConfigs(srv, s)
	if err != nil {
		return nil, err
	}
	rep := &report{Started: time.Now(), Go: runtime.Version(), CPUs: runtime.NumCPU(), Settings: s}
	if info, err := srv.admin.Info(context.Background(), "server").Result(); err == nil {
		rep.Redis = infoField(info, "redis_version")
	}
	// Warm up, unrecorded: scripts cached in Redis, code paths and CPU
	// caches hot, so that the first library of the first round is not
	// handicapped.
	for _, ls := range allLibs(s.Tuning) {
		spec := loadSpec{Lib: ls.Name, Addr: srv.addr, Prefix: "bench:warmup:", NKeys: 1, Goroutines: 4,
			Duration: 200 * time.Millisecond, PoolSize: s.PoolSize, Latency: s.Latency, Tuning: s.Tuning}
		if _, err := runInProcess(srv, spec, ls); err != nil {
			return nil, fmt.Errorf("warm-up %s: %w", ls.Name, err)
		}
	}
	total, n := 0, 0
	for _, c := range cfgs {
		total += len(c.Libs) * s.Rounds
		rep.Configs = append(rep.Configs, configInfo{Scenario: c.Scenario, Title: c.Title, Libs: libNames(c.Libs)})
	}
	for _, c := range cfgs {
		for r := 1; r <= s.Rounds; r++ {
			for _, ls := range c.Libs {
				n++
				if err := flush(srv); err != nil {
					return nil, err
				}
				m, note, err := c.run(ls)
				smp := sample{Title: c.Title, Lib: ls.Name, Round: r, Metrics: m, Note: note}
				if err != nil {
					smp.Err = err.Error()
				}
				rep.Samples = append(rep.Samples, smp)
				fmt.Fprintf(progress, "[%d/%d] %s | round %d | %s: %s\n", n, total, c.Title, r, ls.Name, brief(c.Scenario, smp))
			}
		}
	}
	rep.Elapsed = time.Since(rep.Started).Seconds()
	rep.summarize()
	return rep, nil
}

func libNames(ls []libSpec) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

// loadMetrics turns a load result into the report's metrics.
func loadMetrics(r loadResult) map[string]float64 {
	acq := float64(r.Acq)
	m := map[string]float64{
		"acq_s":       div(acq, r.Seconds),
		"rt_acq":      div(float64(r.RoundTrips), acq),
		"cmds_acq":    div(float64(r.ServerCmds), acq),
		"cli_cpu_us":  div(r.ClientCPU*1e6, acq),
		"srv_cpu_us":  div(r.ServerCPU*1e6, acq),
		"violations":  float64(r.Violations),
		"gave_up":     float64(r.GaveUp),
		"errors":      float64(r.Errors),
		"stuck":       float64(r.Stuck),
		"owners":      float64(len(r.PerOwner)),
		"wait_p50_ms": 0, "wait_p99_ms": 0, "wait_max_ms": 0, "pair_p50_us": 0, "pair_p99_us": 0,
	}
	if r.Wait != nil && r.Pair != nil {
		m["wait_p50_ms"] = ms(r.Wait.quantile(0.50))
		m["wait_p99_ms"] = ms(r.Wait.quantile(0.99))
		m["wait_max_ms"] = ms(r.Wait.quantile(1))
		m["pair_p50_us"] = ms(r.Pair.quantile(0.50)) * 1000
		m["pair_p99_us"] = ms(r.Pair.quantile(0.99)) * 1000
	}
	m["fair"], m["starved"] = spread(r.PerOwner)
	if len(r.PerProc) > 1 {
		m["proc_fair"], _ = spread(r.PerProc)
	}
	if p := r.Peer; p != nil {
		m["peer_rounds"], m["peer_wait_max_ms"], m["peer_grants_max"] = float64(p.Rounds), p.WaitMax*1000, float64(p.GrantsMax)
		m["peer_wait_settled_ms"], m["peer_grants_settled"] = p.WaitMaxSettled*1000, float64(p.GrantsMaxSettled)
		m["errors"] += float64(p.Errors)
	}
	return m
}

// spread is max/min over the non-zero counts, and how many counts are zero.
func spread(counts []int64) (ratio, zeros float64) {
	var lo, hi int64 = -1, 0
	for _, n := range counts {
		if n == 0 {
			zeros++
			continue
		}
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	if lo > 0 {
		ratio = float64(hi) / float64(lo)
	}
	return ratio, zeros
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
