package torture

import (
	"testing"
	"time"
)

// The checks as they apply to the newer kinds: a SpinLock's holds exclude
// Lock's on a shared name, a PermitSemaphore's permits count against the
// bound until their leases end and are never handed out after, and
// CountDownLatch rounds.

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
	call1 := func(op Op, start, end int, out Outcome) Call { c := call(op, start, end, out); c.N = 1; return c }
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
		// Set again at 25 (count 1), awaited at 27; counted down at 200.
		{"set again: the new count's Await let go by the old zero", []Call{set, down(10, OutOK), down(20, OutOK),
			call1(OpSetCount, 25, 26, OutOK), await(27, 30, OutOK), down(200, OutOK)}, nil, []string{VLatch}},
		{"set again: an old round's CountDown that ended by its ctx may count the new one", []Call{set, down(10, OutOK), down(20, OutOK),
			down(22, OutCtx), call1(OpSetCount, 25, 26, OutOK), await(27, 30, OutOK), down(200, OutOK)}, nil, nil},
		{"set again: the new count's Await gives up", []Call{set, down(10, OutOK), down(20, OutOK),
			call1(OpSetCount, 25, 26, OutOK), timedOut(27, 100), down(200, OutOK)}, nil, nil},
		{"set again: the new count's Await let go by its own CountDown", []Call{set, down(10, OutOK), down(20, OutOK),
			call1(OpSetCount, 25, 26, OutOK), await(27, 202, OutOK), down(200, OutOK)}, nil, nil},
		{"set again: an old Await still waiting is judged only until the new count", []Call{set, down(10, OutOK), down(20, OutOK),
			call1(OpSetCount, 25, 26, OutOK), await(2, 3000, OutOK), down(2990, OutOK)}, nil, nil},
		{"set again late: an old Await waited long at zero", []Call{set, down(10, OutOK), down(20, OutOK),
			call1(OpSetCount, 2500, 2501, OutOK), await(2, 3000, OutOK), down(2990, OutOK)}, nil, []string{VLiveness}},
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

func TestCheckStaleGrants(t *testing.T) {
	// A permit of id "ab" whose Acquire began at 0; the hook saw its script
	// run by 10, setting a 200ms lease.
	permit := func(grant int) Hold {
		h := hl(1, PrimPermit, "A/p", "ab", grant, grant+50)
		h.AcqStart = at(0)
		return h
	}
	run := func(script string, ms, lease int) LeaseRun {
		return LeaseRun{T: at(ms), Script: script, Grants: script == "permit_acquire", Res: "A/p", Owner: "ab", Lease: time.Duration(lease) * time.Millisecond}
	}
	relayed := func(grant int) Hold {
		h := hl(2, PrimLock, "A/l", "w", grant, grant+50)
		h.Relayed = "h"
		return h
	}
	lockRun := func(script string, ms, lease int) LeaseRun {
		return LeaseRun{T: at(ms), Script: script, Grants: script == "lock", Res: "A/l", Owner: "h", Lease: time.Duration(lease) * time.Millisecond}
	}
	update := func(start, end int) Call {
		return Call{ID: 9, Prim: PrimPermit, Op: OpUpdateLease, Res: []string{"A/p"}, Owners: []string{"ab"}, Lease: 200 * time.Millisecond,
			Start: at(start), End: at(end), Out: OutOK, Client: "A1"}
	}
	tests := []struct {
		name  string
		holds []Hold
		calls []Call
		runs  []LeaseRun
		want  []string
	}{
		{"granted within its lease", []Hold{permit(150)}, nil, []LeaseRun{run("permit_acquire", 10, 200)}, nil},
		{"granted after its lease ran out", []Hold{permit(400)}, nil, []LeaseRun{run("permit_acquire", 10, 200)}, []string{VStale}},
		{"another owner's script", []Hold{permit(400)}, nil, []LeaseRun{func() LeaseRun { r := run("permit_acquire", 10, 200); r.Owner = "cd"; return r }()}, nil},
		{"a script of an earlier call", []Hold{func() Hold { h := permit(400); h.AcqStart = at(20); return h }()}, nil, []LeaseRun{run("permit_acquire", 10, 200)}, nil},
		{"a late grant given back, then a grant in time", []Hold{permit(400)}, nil,
			[]LeaseRun{run("permit_acquire", 10, 200), run("permit_acquire", 380, 200)}, nil},
		{"handed over late, but a renewal after the grant moved the lease", []Hold{permit(400)}, nil,
			[]LeaseRun{run("permit_acquire", 10, 200), run("permit_update", 300, 200)}, nil},
		{"a renewal before the grant moves nothing", []Hold{permit(400)}, nil,
			[]LeaseRun{run("permit_update", 5, 300), run("permit_acquire", 10, 200)}, []string{VStale}},
		{"UpdateLease answered within the new lease", nil, []Call{update(0, 150)}, []LeaseRun{run("permit_update", 10, 200)}, nil},
		{"UpdateLease answered after the new lease", nil, []Call{update(0, 400)}, []LeaseRun{run("permit_update", 10, 200)}, []string{VStale}},
		// Relays: w's hold is relayed under h's field; h's grant ran by 10.
		{"relayed within the lease h's grant set", []Hold{relayed(150)}, nil, []LeaseRun{lockRun("lock", 10, 200)}, nil},
		{"relayed after that lease ran out", []Hold{relayed(400)}, nil, []LeaseRun{lockRun("lock", 10, 200)}, []string{VStale}},
		{"relayed after a renewal of the field moved the lease", []Hold{relayed(400)}, nil,
			[]LeaseRun{lockRun("lock", 10, 200), lockRun("renew", 300, 200)}, nil},
		{"relayed under a field no script set", []Hold{relayed(150)}, nil, nil, []string{VStale}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := logOf(1000, tc.holds, tc.calls, nil)
			l.Runs = tc.runs
			expect(t, CheckStaleGrants(l), tc.want...)
		})
	}
}

func TestCheckFairBursts(t *testing.T) {
	lock := func(id int, owner string, start, end int) Call {
		return waitCall(id, PrimFair, "A/fairb3", owner, start, end, OutOK)
	}
	tests := []struct {
		name   string
		calls  []Call
		faults []Fault
		want   []string
	}{
		{"granted in order", []Call{lock(1, "a", 0, 100), lock(2, "b", 20, 150), lock(3, "c", 40, 200)}, nil, nil},
		{"a later waiter first", []Call{lock(1, "a", 0, 100), lock(2, "b", 20, 200), lock(3, "c", 40, 150)}, nil, []string{VFairOrder}},
		{"asked at the same moment", []Call{lock(1, "a", 0, 200), lock(2, "b", 2, 150)}, nil, nil},
		{"a restart lost the queue", []Call{lock(1, "a", 0, 200), lock(2, "b", 20, 150)},
			[]Fault{{Kind: FaultRestart, Server: "A", Start: at(50), End: at(60)}}, nil},
		{"another name", []Call{lock(1, "a", 0, 200), func() Call { c := lock(2, "b", 20, 150); c.Res = []string{"A/fair0"}; return c }()}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, CheckFairBursts(logOf(1000, nil, tc.calls, tc.faults)), tc.want...)
		})
	}
}
