package torture

import "testing"

// The checks as they apply to the kinds of issue 20: a SpinLock's holds
// exclude Lock's on a shared name, a PermitSemaphore's permits count
// against the bound until their leases end, and CountDownLatch rounds.

// permit is a permit hold with a lease that ends at leaseEnd.
func permit(id int, res, pid string, grant, end, leaseEnd int) Hold {
	h := hl(id, PrimPermit, res, pid, grant, end)
	h.LeaseUntil, h.LeaseLate = at(leaseEnd), at(leaseEnd+1)
	return h
}

func TestKindsSafety(t *testing.T) {
	tests := []struct {
		name  string
		holds []Hold
		want  []string
	}{
		{"spin and lock on one name", []Hold{hl(1, PrimSpin, "A/shared0", "x", 10, 30), hl(2, PrimLock, "A/shared0", "y", 20, 40)}, []string{VExclusion}},
		{"spin after lock", []Hold{hl(1, PrimLock, "A/shared0", "x", 10, 30), hl(2, PrimSpin, "A/shared0", "y", 30, 40)}, nil},
		{"three permits of three", []Hold{permit(1, "A/p", "a", 10, 50, 100), permit(2, "A/p", "b", 20, 50, 100), permit(3, "A/p", "c", 30, 50, 100)}, nil},
		{"four permits of three", []Hold{permit(1, "A/p", "a", 10, 50, 100), permit(2, "A/p", "b", 20, 50, 100), permit(3, "A/p", "c", 30, 50, 100), permit(4, "A/p", "d", 40, 60, 100)}, []string{VPermits}},
		{"a fourth after a lease ended", []Hold{permit(1, "A/p", "a", 10, 90, 35), permit(2, "A/p", "b", 20, 90, 100), permit(3, "A/p", "c", 30, 90, 100), permit(4, "A/p", "d", 40, 60, 100)}, nil},
		{"permits are not exclusive", []Hold{permit(1, "A/p", "a", 10, 50, 100), permit(2, "A/p", "b", 20, 50, 100)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(1000, tt.holds, nil, nil)
			safe := SafeSpans(l)
			lim := DefaultLimits()
			expect(t, append(CheckMutualExclusion(l, safe, lim), CheckSemaphoreBound(l, safe, lim)...), tt.want...)
		})
	}
}

func TestPermitNotHeld(t *testing.T) {
	release := func(ms int) Call {
		return Call{ID: 50, Prim: PrimPermit, Op: OpRelease, Res: []string{"A/p"}, Owners: []string{"a"}, Holds: []int{1},
			Start: at(ms), End: at(ms + 1), CtxEnd: at(ms + 500), Out: OutNotHeld}
	}
	tests := []struct {
		name     string
		leaseEnd int
		want     []string
	}{
		{"after its lease", 40, nil},
		{"within its lease", 400, []string{VErrors}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := permit(1, "A/p", "a", 10, 50, tt.leaseEnd)
			h.DoneOut = OutNotHeld
			l := logOf(1000, []Hold{h}, []Call{release(50)}, nil)
			expect(t, CheckCallErrors(l, SafeSpans(l)), tt.want...)
		})
	}
}

func TestCheckLatches(t *testing.T) {
	call := func(op Op, start, end int, out Outcome) Call {
		return Call{Prim: PrimLatch, Op: op, Res: []string{"A/cdl"}, N: 2, Client: "A1",
			Start: at(start), End: at(end), CtxEnd: at(end + 5000), Out: out}
	}
	set := call(OpSetCount, 0, 1, OutOK)
	down := func(start int, out Outcome) Call { return call(OpCountDown, start, start+1, out) }
	await := func(start, end int, out Outcome) Call { return call(OpAwait, start, end, out) }
	timedOut := func(start, end int) Call { c := await(start, end, OutCtx); c.CtxEnd = at(end); return c }
	restart := Fault{Kind: FaultRestart, Server: "A", Start: at(5), End: at(8)}
	tests := []struct {
		name   string
		calls  []Call
		faults []Fault
		want   []string
	}{
		{"released after the last CountDown", []Call{set, down(10, OutOK), down(20, OutOK), await(2, 22, OutOK)}, nil, nil},
		{"released after one CountDown of two", []Call{set, down(10, OutOK), down(20, OutOK), await(2, 15, OutOK)}, nil, []string{VLatch}},
		{"a lost reply may have counted", []Call{set, down(10, OutRedis), down(20, OutOK), down(30, OutOK), await(2, 22, OutOK)}, nil, nil},
		{"the count forgotten by a restart", []Call{set, down(10, OutOK), await(2, 9, OutOK)}, []Fault{restart}, nil},
		{"a fresh name already set", []Call{call(OpSetCount, 0, 1, OutNo)}, nil, []string{VLatch}},
		{"still waiting long after zero", []Call{set, down(10, OutOK), down(20, OutOK), timedOut(2, 3000)}, nil, []string{VLiveness}},
		{"gave up before zero", []Call{set, down(10, OutOK), down(2000, OutOK), timedOut(2, 500)}, nil, nil},
		{"never reached zero", []Call{set, down(10, OutOK), down(20, OutRedis), timedOut(2, 3000)}, nil, nil},
		{"a slow wake-up inside a fault window", []Call{set, down(10, OutOK), down(20, OutOK), await(2, 3000, OutOK)},
			[]Fault{{Kind: FaultKillPubSub, Server: "A", Start: at(15), End: at(16)}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.calls {
				tt.calls[i].ID = i + 1
			}
			l := logOf(10000, nil, tt.calls, tt.faults)
			expect(t, CheckLatches(l, DefaultLimits(), Relaxations{}), tt.want...)
		})
	}
}
