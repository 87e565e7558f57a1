package torture

import (
	"testing"
	"time"
)

// TestCheckStrictSwitch: what a master switch explains in CheckStrict (the
// sentinels named a new master at +1000ms; switchNotice is 1s): an overlap
// whose later grant came after the switch, when one of the two holds was
// granted within the notice and ended within it of the switch or of its
// own grant; and an Unlock's ErrNotHeld for a hold the switch could have
// taken. Nothing else.
func TestCheckStrictSwitch(t *testing.T) {
	if switchNotice != time.Second {
		t.Fatalf("the rows assume a 1s switchNotice, not %v", switchNotice)
	}
	switches := []Switch{{At: at(1000), From: "a", To: "b"}}
	unlock := func(id int, res, owner string, start, end int, out Outcome, holds ...int) Call {
		c := waitCall(id, PrimLock, res, owner, start, end, out)
		c.Op, c.Holds = OpUnlock, holds
		return c
	}
	tests := []struct {
		name  string
		holds []Hold
		calls []Call
		want  []string
	}{
		{"earlier holder lost, told within the notice",
			[]Hold{lost(hl(1, PrimLock, "A/l", "A1:x", 500, 1900), 1250), hl(2, PrimLock, "A/l", "A2:y", 1050, 1100)}, nil, nil},
		{"earlier holder told after the notice",
			[]Hold{lost(hl(1, PrimLock, "A/l", "A1:x", 500, 2500), 2100), hl(2, PrimLock, "A/l", "A2:y", 1050, 2200)}, nil, []string{VExclusion}},
		{"later grant before the switch",
			[]Hold{lost(hl(1, PrimLock, "A/l", "A1:x", 500, 1900), 1250), hl(2, PrimLock, "A/l", "A2:y", 900, 1100)}, nil, []string{VExclusion}},
		{"later hold granted on the former master, lost within the notice",
			[]Hold{hl(1, PrimLock, "A/l", "A2:y", 1010, 2200), lost(hl(2, PrimLock, "A/l", "A1:x", 1200, 2500), 1400)}, nil, nil},
		{"both granted long after the switch: no excuse",
			[]Hold{hl(1, PrimLock, "A/l", "A2:y", 3000, 4000), lost(hl(2, PrimLock, "A/l", "A1:x", 3200, 3500), 3400)}, nil, []string{VExclusion}},
		{"ErrNotHeld of a hold across the switch",
			[]Hold{hl(1, PrimLock, "A/l", "A1:x", 800, 1300)},
			[]Call{unlock(10, "A/l", "A1:x", 1300, 1310, OutNotHeld, 1)}, nil},
		{"ErrNotHeld of a hold granted long after the switch",
			[]Hold{hl(1, PrimLock, "A/l", "A1:x", 3000, 3300)},
			[]Call{unlock(10, "A/l", "A1:x", 3300, 3310, OutNotHeld, 1)}, []string{VErrors}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(6000, tt.holds, tt.calls, nil)
			l.Switches = switches
			expect(t, CheckStrict(l, DefaultLimits(), Relaxations{}, strictLimits), tt.want...)
		})
	}
}

func TestUnplannedSwitches(t *testing.T) {
	injected := Interval{at(1000), at(4000)} // a SENTINEL FAILOVER and its settle
	tests := []struct {
		name     string
		switches []Switch
		unsafe   int // Unsafe windows after
	}{
		{"a switch inside an injected failover", []Switch{{At: at(2000), From: "a", To: "b"}}, 1},
		{"a switch the sentinels made on their own", []Switch{{At: at(9000), From: "b", To: "a"}}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{}
			r.topo.addUnsafe(injected, "SENTINEL FAILOVER", nil)
			l := logOf(20000, nil, nil, nil)
			l.Switches = tc.switches
			r.unplannedSwitches(l)
			rx := r.topo.relax()
			if len(rx.Unsafe) != tc.unsafe {
				t.Fatalf("%d Unsafe windows, want %d", len(rx.Unsafe), tc.unsafe)
			}
			if tc.unsafe == 2 {
				w := rx.Unsafe[1]
				if w.A != at(9000).Add(-unplannedLead) || w.B != at(9000).Add(topoSettle) || len(l.Faults) != 1 || l.Faults[0].Kind != FaultUnplanned {
					t.Fatalf("window %v, faults %v", w.Interval, l.Faults)
				}
			}
		})
	}
}
