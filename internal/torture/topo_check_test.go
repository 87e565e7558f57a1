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
	leased := func(h Hold, lease, lost int) Hold {
		h.Lease, h.Lost = time.Duration(lease)*time.Millisecond, at(lost)
		return h
	}
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
		{"token back across a window (tokens follow the clock: judged)", []Hold{fenced(hl(1, PrimFenced, "A/f", "x", 10, 20), 5), fenced(hl(2, PrimFenced, "A/f", "y", 200, 210), 3)},
			nil, Relaxations{Unsafe: []Window{window(100, 150)}}, []string{VFencing}},
		{"token granted inside a window, judged too", []Hold{fenced(hl(1, PrimFenced, "A/f", "x", 10, 20), 5), fenced(hl(2, PrimFenced, "A/f", "y", 120, 130), 3)},
			nil, Relaxations{Unsafe: []Window{window(100, 150)}}, []string{VFencing}},
		{"token rising across a window", []Hold{fenced(hl(1, PrimFenced, "A/f", "x", 10, 20), 5), fenced(hl(2, PrimFenced, "A/f", "y", 200, 210), 9)},
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
		{"replica lacks a 2 ms grant whose Lost closed as the read went", []Hold{leased(hl(1, PrimLock, "A/l", "x", 10, 3000), 2, 12)}, nil,
			Relaxations{Probes: []ReplicaProbe{probe(1, 10, true, true)}}, nil},
		{"replica lacks a 40 ms grant long before its Lost", []Hold{leased(hl(1, PrimLock, "A/l", "x", 10, 3000), 40, 50)}, nil,
			Relaxations{Probes: []ReplicaProbe{probe(1, 11, true, true)}}, []string{VReplica}},
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

// TestCheckTopologyLostReadRelease: a write Lock refused as a read-to-write
// upgrade is excused only when the owner's read release met an Unsafe
// window of the name (a lossy failover may have dropped it, and the new
// master still shows the read hold); anywhere else it is a call error.
func TestCheckTopologyLostReadRelease(t *testing.T) {
	const upgrade = `lock "rw": lockactor: invalid argument: read-to-write upgrade: this owner holds read holds`
	release := Call{ID: 1, Prim: PrimRead, Op: OpUnlock, Res: []string{"A/rw"}, Owners: []string{"o"}, Start: at(100), End: at(120), Out: OutOK}
	write := func(owner string) Call {
		return Call{ID: 2, Prim: PrimWrite, Op: OpLock, Res: []string{"A/rw"}, Owners: []string{owner}, Start: at(300), End: at(301), Out: OutInvalid, Err: upgrade}
	}
	unsafe := func(a, b int) Relaxations {
		return Relaxations{Unsafe: []Window{{Interval: Interval{at(a), at(b)}, Why: "test"}}}
	}
	tests := []struct {
		name  string
		calls []Call
		rx    Relaxations
		want  []string
	}{
		{"release inside a window", []Call{release, write("o")}, unsafe(110, 200), nil},
		{"no window", []Call{release, write("o")}, Relaxations{}, []string{VErrors}},
		{"window after the write began", []Call{release, write("o")}, unsafe(310, 400), []string{VErrors}},
		{"window before the release", []Call{release, write("o")}, unsafe(10, 50), []string{VErrors}},
		{"another owner's release", []Call{release, write("p")}, unsafe(110, 200), []string{VErrors}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, CheckTopology(logOf(5000, nil, tt.calls, nil), DefaultLimits(), tt.rx), tt.want...)
			// The strict variant's failovers lose writes too: it excuses the
			// same refusals (a write refused as an upgrade is not a safety
			// question).
			expect(t, CheckStrict(logOf(5000, nil, tt.calls, nil), DefaultLimits(), tt.rx, strictLimits), tt.want...)
		})
	}
}
