package torture

import (
	"testing"
	"time"
)

// TestCheckTopology: what the topology relaxations excuse, and what they
// leave to the checks (every case is judged by CheckTopology as a whole).
func TestCheckTopology(t *testing.T) {
	window := func(a, b int, res ...string) Window {
		w := Window{Interval: Interval{at(a), at(b)}, Why: "test"}
		if len(res) > 0 {
			w.In = func(r string) bool { return r == res[0] }
		}
		return w
	}
	fenced := func(h Hold, token uint64) Hold { h.Token = token; return h }
	gone := func(h Hold, probe int) Hold { h.ProbeGone, h.ProbeAt = true, at(probe); return h }
	renewal := func(ms int, res, field string) Renewal {
		return Renewal{T: at(ms), Client: "A1", Res: res, Field: field}
	}
	probe := func(hold, ms int, answered, missing bool) ReplicaProbe {
		return ReplicaProbe{Hold: hold, At: at(ms), Answered: answered, Gone: missing}
	}
	tests := []struct {
		name     string
		holds    []Hold
		renewals []Renewal
		rx       Relaxations
		want     []string
	}{
		{"overlap, no window", []Hold{hl(1, PrimLock, "A/l", "x", 10, 300), hl(2, PrimLock, "A/l", "y", 200, 400)}, nil, Relaxations{}, []string{VExclusion}},
		{"hold open at the window's start is cut there", []Hold{hl(1, PrimLock, "A/l", "x", 10, 300), hl(2, PrimLock, "A/l", "y", 200, 400)},
			nil, Relaxations{Unsafe: []Window{window(100, 150)}}, nil},
		{"grant inside the window is left out", []Hold{hl(1, PrimLock, "A/l", "x", 120, 300), hl(2, PrimLock, "A/l", "y", 200, 400)},
			nil, Relaxations{Unsafe: []Window{window(100, 150)}}, nil},
		{"overlap after the window", []Hold{hl(1, PrimLock, "A/l", "x", 160, 300), hl(2, PrimLock, "A/l", "y", 200, 400)},
			nil, Relaxations{Unsafe: []Window{window(100, 150)}}, []string{VExclusion}},
		{"window of another name", []Hold{hl(1, PrimLock, "A/l", "x", 10, 300), hl(2, PrimLock, "A/l", "y", 200, 400)},
			nil, Relaxations{Unsafe: []Window{window(100, 150, "A/m")}}, []string{VExclusion}},
		{"frozen windows excuse no overlap", []Hold{hl(1, PrimLock, "A/l", "x", 10, 300), hl(2, PrimLock, "A/l", "y", 200, 400)},
			nil, Relaxations{Frozen: []Window{window(100, 150)}}, []string{VExclusion}},
		{"token back within a stretch", []Hold{fenced(hl(1, PrimFenced, "A/f", "x", 10, 20), 5), fenced(hl(2, PrimFenced, "A/f", "y", 200, 210), 3)},
			nil, Relaxations{}, []string{VFencing}},
		{"token back across a window", []Hold{fenced(hl(1, PrimFenced, "A/f", "x", 10, 20), 5), fenced(hl(2, PrimFenced, "A/f", "y", 200, 210), 3)},
			nil, Relaxations{Unsafe: []Window{window(100, 150)}}, nil},
		{"token back after the window", []Hold{fenced(hl(1, PrimFenced, "A/f", "x", 160, 170), 5), fenced(hl(2, PrimFenced, "A/f", "y", 200, 210), 3)},
			nil, Relaxations{Unsafe: []Window{window(100, 150)}}, []string{VFencing}},
		{"ghost grant", []Hold{gone(hl(1, PrimLock, "A/l", "x", 10, 300), 12)}, nil, Relaxations{}, []string{VGhost}},
		{"ghost grant in a frozen window", []Hold{gone(hl(1, PrimLock, "A/l", "x", 10, 300), 12)}, nil, Relaxations{Frozen: []Window{window(11, 50)}}, nil},
		{"renewal after unlock", []Hold{hl(1, PrimLock, "A/l", "x", 10, 100)}, []Renewal{renewal(300, "A/l", "x")}, Relaxations{}, []string{VRenewal}},
		{"renewal after unlock inside an unsafe window", []Hold{hl(1, PrimLock, "A/l", "x", 10, 100)}, []Renewal{renewal(300, "A/l", "x")},
			Relaxations{Unsafe: []Window{window(50, 400)}}, nil},
		{"replica lacks a grant", []Hold{hl(1, PrimLock, "A/l", "x", 10, 3000)}, nil, Relaxations{Probes: []ReplicaProbe{probe(1, 11, true, true)}}, []string{VReplica}},
		{"replica has it", []Hold{hl(1, PrimLock, "A/l", "x", 10, 3000)}, nil, Relaxations{Probes: []ReplicaProbe{probe(1, 11, true, false)}}, nil},
		{"replica did not answer", []Hold{hl(1, PrimLock, "A/l", "x", 10, 3000)}, nil, Relaxations{Probes: []ReplicaProbe{probe(1, 11, false, false)}}, nil},
		{"replica read too late to judge", []Hold{hl(1, PrimLock, "A/l", "x", 10, 3000)}, nil, Relaxations{Probes: []ReplicaProbe{probe(1, 10+int(watchdog/time.Millisecond), true, true)}}, nil},
		{"replica resynchronising", []Hold{hl(1, PrimLock, "A/l", "x", 10, 3000)}, nil,
			Relaxations{Probes: []ReplicaProbe{probe(1, 11, true, true)}, Frozen: []Window{window(0, 20)}}, nil},
		{"master lacked it too (a ghost, reported once)", []Hold{gone(hl(1, PrimLock, "A/l", "x", 10, 3000), 11)}, nil,
			Relaxations{Probes: []ReplicaProbe{probe(1, 11, true, true)}}, []string{VGhost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(5000, tt.holds, nil, nil)
			l.Renewals = tt.renewals
			expect(t, CheckTopology(l, DefaultLimits(), tt.rx), tt.want...)
		})
	}
}
