package torture

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Figures are a run's numbers, for the test's log.
type Figures struct {
	Duration    time.Duration
	Calls       int
	Ops         map[string]int // "<prim> <Op> -> <outcome>"
	RedisErrors map[string]int // "<prim> <Op>": Redis errors (and ErrNoQuorum) by kind of call
	Sections    map[string]int // critical sections (holds) by primitive
	Relayed     map[string]int // holds relayed from a local owner without a script, by primitive
	RelayedEnd  map[string]int // how relayed holds ended (safe spans)
	EndedBy     map[string]int // how holds ended (safe spans)
	Renewals    int
	// AtLeaseEnd counts the fixed-lease holds whose last Unlock was called
	// within leaseEdge of their lease's earliest end (see plan.edge).
	AtLeaseEnd int
	// Stalls counts the spans in which the process's timers ran more than
	// stallMin late; LongestStall is the latest of them.
	Stalls       int
	LongestStall time.Duration
	Faults       map[string]int
	HookEffects  map[string]int // commands the fault hook refused, lost the reply of, delayed
	Violations   map[string]int
	// Topology is what a Topology run counts besides (grants refused as
	// not replicated, replica probes, relaxed windows); nil otherwise.
	Topology map[string]int
}

// leaseEdge is how close to its lease's end an Unlock counts as racing it.
const leaseEdge = 10 * time.Millisecond

// Summarize computes the figures of a log and its violations.
func Summarize(l *Log, vs []Violation, hook [numEffects]int) Figures {
	f := Figures{Duration: l.End.Sub(l.Start), Calls: len(l.Calls), Ops: map[string]int{}, RedisErrors: map[string]int{},
		Sections: map[string]int{}, Relayed: map[string]int{}, RelayedEnd: map[string]int{}, EndedBy: map[string]int{}, Renewals: len(l.Renewals), Faults: map[string]int{},
		HookEffects: map[string]int{}, Violations: countViolations(vs)}
	for i := range l.Calls {
		c := &l.Calls[i]
		f.Ops[fmt.Sprintf("%s %s -> %s", c.Prim, c.Op, c.Out)]++
		if c.Out == OutRedis || c.Out == OutNoQuorum {
			f.RedisErrors[fmt.Sprintf("%s %s", c.Prim, c.Op)]++
		}
	}
	for _, h := range l.Holds {
		if h.Relayed != "" {
			f.Relayed[h.Prim.String()]++
		}
		if !h.LeaseUntil.IsZero() && !h.End.IsZero() && h.End.Sub(h.LeaseUntil).Abs() <= leaseEdge {
			f.AtLeaseEnd++
		}
	}
	for _, s := range SafeSpans(l) {
		f.Sections[s.H.Prim.String()]++
		f.EndedBy[s.By.String()]++
		if s.H.Relayed != "" {
			f.RelayedEnd[s.By.String()]++
		}
	}
	for _, x := range l.Faults {
		f.Faults[x.Kind.String()]++
	}
	for _, s := range l.Stalls {
		f.Stalls++
		f.LongestStall = max(f.LongestStall, s.Late())
	}
	for e := EffectRefuse; e < numEffects; e++ {
		f.HookEffects[e.String()] = hook[e]
	}
	return f
}

func countViolations(vs []Violation) map[string]int {
	m := map[string]int{}
	for _, v := range vs {
		m[v.Check]++
	}
	return m
}

// String renders the figures as a few indented blocks.
func (f Figures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %v, %d calls, %d renewals seen\n", f.Duration.Round(time.Millisecond), f.Calls, f.Renewals)
	fmt.Fprintf(&b, "unlocks within %v of a fixed lease's end: %d\n", leaseEdge, f.AtLeaseEnd)
	fmt.Fprintf(&b, "process stalls (timers over %v late): %d, the longest %v\n", stallMin, f.Stalls, f.LongestStall.Round(time.Millisecond))
	block := func(title string, m map[string]int) {
		fmt.Fprintf(&b, "%s:", title)
		if len(m) == 0 {
			b.WriteString(" none\n")
			return
		}
		b.WriteString("\n")
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %-48s %7d\n", k, m[k])
		}
	}
	block("operations by kind and outcome", f.Ops)
	block("redis errors by call", f.RedisErrors)
	block("critical sections by primitive", f.Sections)
	block("holds relayed without a script", f.Relayed)
	block("relayed holds ended by", f.RelayedEnd)
	block("critical sections ended by", f.EndedBy)
	block("faults injected", f.Faults)
	block("fault hook effects (commands)", f.HookEffects)
	if f.Topology != nil {
		block("topology", f.Topology)
	}
	block("violations", f.Violations)
	return b.String()
}
