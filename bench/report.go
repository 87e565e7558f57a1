package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report is everything one run measured.
type report struct {
	Command    string                                   `json:"command"`
	Started    time.Time                                `json:"started"`
	Elapsed    float64                                  `json:"elapsed_s"`
	Go         string                                   `json:"go"`
	Redis      string                                   `json:"redis"`
	CPUs       int                                      `json:"cpus"`
	Deployment deployment                               `json:"deployment"` // --latency and --pin as applied
	Settings   settings                                 `json:"settings"`
	Configs    []configInfo                             `json:"configs"`
	Samples    []sample                                 `json:"samples"`
	Medians    map[string]map[string]map[string]float64 `json:"medians"` // config -> lib -> metric
	Targets    []target                                 `json:"targets"`
}

// configInfo names a table and its libraries.
type configInfo struct {
	Scenario string   `json:"scenario"`
	Title    string   `json:"title"`
	Libs     []string `json:"libs"`
}

// column is one column of a table: a metric, its heading and format.
type column struct {
	key, head string
	format    func(float64) string
}

func fixed(prec int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', prec, 64) }
}

// kilo prints throughputs as 12.3k.
func kilo(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// primary is the metric each scenario's ratio against raw is taken on.
var primary = map[string]string{
	"uncontended": "acq_s", "contended": "acq_s", "multiproc": "acq_s", "manykeys": "acq_s",
	titleKindWaiters: "heap_per_waiter", titleKindNames: "pairs_s", titleKindHeld: "rt_period",
	"frozen": "ratio",
}

// Scale tables are told apart by the start of their titles.
const (
	titleKindWaiters = "scale-waiters"
	titleKindNames   = "scale-names"
	titleKindHeld    = "scale-held"
)

// kindOf is the column set a config's table uses.
func kindOf(c configInfo) string {
	if c.Scenario != "scale" {
		return c.Scenario
	}
	switch {
	case strings.Contains(c.Title, "waiting"):
		return titleKindWaiters
	case strings.Contains(c.Title, "names"):
		return titleKindNames
	}
	return titleKindHeld
}

var loadColumns = []column{
	{"acq_s", "acq/s", kilo}, {"wait_p50_ms", "wait p50 ms", fixed(2)}, {"wait_p99_ms", "p99 ms", fixed(1)},
	{"wait_max_ms", "max ms", fixed(0)}, {"rt_acq", "RT/acq", fixed(2)}, {"cmds_acq", "cmds/acq", fixed(1)},
	{"cli_cpu_us", "client CPU µs/acq", fixed(0)}, {"srv_cpu_us", "server CPU µs/acq", fixed(0)}, {"fair", "max/min", fixed(2)}, {"starved", "starved", fixed(0)}, {"violations", "overlaps", fixed(0)},
	{"gave_up", "give-ups", fixed(0)}, {"errors", "errors", fixed(0)},
}

var columns = map[string][]column{
	"uncontended": {{"acq_s", "pairs/s", kilo}, {"pair_p50_us", "pair p50 µs", fixed(0)}, {"pair_p99_us", "pair p99 µs", fixed(0)},
		{"rt_acq", "RT/pair", fixed(2)}, {"cmds_acq", "cmds/pair", fixed(1)}, {"cli_cpu_us", "client CPU µs/pair", fixed(0)},
		{"srv_cpu_us", "server CPU µs/pair", fixed(0)}, {"errors", "errors", fixed(0)}},
	"contended": loadColumns, "manykeys": loadColumns,
	"multiproc": append(slices.Clone(loadColumns), column{"proc_fair", "process max/min", fixed(2)},
		column{"peer_rounds", "peer grants", fixed(0)}, column{"peer_wait_max_ms", "peer longest wait ms", fixed(1)},
		column{"peer_grants_max", "grants to others in it", fixed(0)},
		column{"peer_wait_settled_ms", "settled: longest wait ms", fixed(1)},
		column{"peer_grants_settled", "settled: grants to others in it", fixed(0)}),
	titleKindWaiters: {{"heap_per_waiter", "heap B/waiter", fixed(0)}, {"stack_per_waiter", "stack B/waiter", fixed(0)},
		{"setup_s", "park s", fixed(2)}, {"setup_rt", "RT/waiter to park", fixed(2)}, {"drain_acq_s", "drain acq/s", kilo},
		{"drain_rt", "drain RT/acq", fixed(2)}, {"granted", "granted", fixed(0)}, {"errors", "errors", fixed(0)}},
	titleKindNames: {{"pairs_s", "pairs/s", kilo}, {"gor_before", "goroutines before", fixed(0)}, {"gor_peak", "right after", fixed(0)},
		{"gor_after", "after settle", fixed(0)}, {"settle_s", "settle s", fixed(1)}, {"heap_before", "heap MiB before", fixed(1)}, {"heap_peak", "right after", fixed(1)},
		{"heap_after", "after settle", fixed(1)}, {"heap_per_name", "B/name kept", fixed(1)}, {"errors", "errors", fixed(0)}},
	"frozen": {{"base_acq_s", "masters 1+2 acq/s before", kilo}, {"frozen_acq_s", "during freeze", kilo},
		{"ratio", "during/before", fixed(2)}, {"ratio_min", "worst master", fixed(2)},
		{"dip", "worst 100ms / before", fixed(2)},
		{"m0_base_acq_s", "master 0 acq/s before", kilo}, {"m0_frozen_acq_s", "during freeze", kilo},
		{"m0_after_acq_s", "1s after", kilo}, {"lost_healthy", "Lost on masters 1+2", fixed(0)},
		{"lost_frozen", "Lost on master 0", fixed(0)}, {"silent_lost", "gone, no Lost", fixed(0)},
		{"errors_m0", "errors master 0", fixed(0)}, {"errors_healthy", "errors masters 1+2", fixed(0)},
		{"violations", "overlaps", fixed(0)}, {"stuck", "stuck", fixed(0)}},
	titleKindHeld: {{"rt_period", "RT/period", fixed(0)}, {"rt_per_100", "RT per 100 locks per period", fixed(2)},
		{"keys_alive", "keys alive", fixed(0)}, {"lost", "lost", fixed(0)}, {"heap_per_held", "heap B/held lock", fixed(0)},
		{"errors", "errors", fixed(0)}},
}

// summarize computes the medians over rounds and the targets.
func (r *report) summarize() {
	r.Medians = map[string]map[string]map[string]float64{}
	vals := map[string]map[string]map[string][]float64{}
	for _, s := range r.Samples {
		if s.Err != "" || s.Metrics == nil {
			continue
		}
		if vals[s.Title] == nil {
			vals[s.Title] = map[string]map[string][]float64{}
		}
		if vals[s.Title][s.Lib] == nil {
			vals[s.Title][s.Lib] = map[string][]float64{}
		}
		for k, v := range s.Metrics {
			vals[s.Title][s.Lib][k] = append(vals[s.Title][s.Lib][k], v)
		}
	}
	for title, libs := range vals {
		r.Medians[title] = map[string]map[string]float64{}
		for lib, metrics := range libs {
			r.Medians[title][lib] = map[string]float64{}
			for k, v := range metrics {
				r.Medians[title][lib][k] = median(v)
			}
		}
	}
	r.Targets = r.checkTargets()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rounds lists one metric of one library per round, in round order.
func (r *report) rounds(title, lib, key string, f func(float64) string) string {
	var out []string
	for _, s := range r.Samples {
		if s.Title == title && s.Lib == lib {
			if s.Err != "" {
				out = append(out, "err")
			} else {
				out = append(out, f(s.Metrics[key]))
			}
		}
	}
	return strings.Join(out, " / ")
}

// writeMarkdown prints one table per config, then the targets.
func (r *report) writeMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "Command: `%s`  \n", r.Command)
	fmt.Fprintf(w, "Started %s, took %.0f s; %s, %d CPUs, Redis %s; medians of %d round(s); RT = go-redis round trips (hook), cmds = server commands (INFO commandstats).  \n",
		r.Started.Format(time.RFC3339), r.Elapsed, r.Go, r.CPUs, r.Redis, r.Settings.Rounds)
	fmt.Fprintf(w, "configuration: %s.\n\n", r.Deployment)
	for _, c := range r.Configs {
		kind := kindOf(c)
		cols, pk := columns[kind], primary[kind]
		pf := kilo
		for _, col := range cols {
			if col.key == pk {
				pf = col.format
			}
		}
		fmt.Fprintf(w, "### %s\n\n| library | %s | x raw |", c.Title, cols[0].head)
		for _, col := range cols[1:] {
			fmt.Fprintf(w, " %s |", col.head)
		}
		fmt.Fprintf(w, " %s per round |\n|---|%s\n", headOf(cols, pk), strings.Repeat("---:|", len(cols)+2))
		base := r.Medians[c.Title]["raw"][pk]
		for _, lib := range c.Libs {
			m, ok := r.Medians[c.Title][lib]
			if !ok {
				fmt.Fprintf(w, "| %s | failed: %s |\n", lib, r.firstErr(c.Title, lib))
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s |", lib, cols[0].format(m[cols[0].key]), ratio(m[pk], base))
			for _, col := range cols[1:] {
				fmt.Fprintf(w, " %s |", col.format(m[col.key]))
			}
			fmt.Fprintf(w, " %s |\n", r.rounds(c.Title, lib, pk, pf))
		}
		fmt.Fprintln(w)
	}
	return r.writeTargets(w)
}

func headOf(cols []column, key string) string {
	for _, c := range cols {
		if c.key == key {
			return c.head
		}
	}
	return key
}

func ratio(v, base float64) string {
	if base == 0 || math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v/base, 'f', 2, 64) + "x"
}

func (r *report) firstErr(title, lib string) string {
	for _, s := range r.Samples {
		if s.Title == title && s.Lib == lib && s.Err != "" {
			return s.Err
		}
	}
	return "no sample"
}

// writeJSON prints the whole report.
func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// brief is the progress line of one sample.
func brief(scenario string, s sample) string {
	if s.Err != "" {
		return "error: " + s.Err
	}
	m := s.Metrics
	switch scenario {
	case "scale":
		var parts []string
		for _, k := range []string{"heap_per_waiter", "drain_acq_s", "pairs_s", "gor_after", "rt_period", "errors"} {
			if v, ok := m[k]; ok {
				parts = append(parts, fmt.Sprintf("%s=%.1f", k, v))
			}
		}
		return strings.Join(parts, " ")
	case "frozen":
		line := fmt.Sprintf("masters 1+2 %s -> %s acq/s (%.2fx, worst master %.2fx, worst 100ms %.2fx), master 0 %s -> %s -> %s acq/s, Lost %.0f on 1+2 / %.0f on 0, gone without Lost %.0f, errors %.0f on 0 / %.0f on 1+2, overlaps %.0f",
			kilo(m["base_acq_s"]), kilo(m["frozen_acq_s"]), m["ratio"], m["ratio_min"], m["dip"], kilo(m["m0_base_acq_s"]), kilo(m["m0_frozen_acq_s"]),
			kilo(m["m0_after_acq_s"]), m["lost_healthy"], m["lost_frozen"], m["silent_lost"], m["errors_m0"], m["errors_healthy"], m["violations"])
		if s.Note != "" {
			line += " (first: " + s.Note + ")"
		}
		return line
	}
	line := fmt.Sprintf("%s acq/s, RT/acq %.2f, p99 %.1f ms, max/min %.2f, starved %.0f, overlaps %.0f, errors %.0f",
		kilo(m["acq_s"]), m["rt_acq"], m["wait_p99_ms"], m["fair"], m["starved"], m["violations"], m["errors"])
	if s.Note != "" {
		line += " (first: " + s.Note + ")"
	}
	return line
}
