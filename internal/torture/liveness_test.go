package torture

import (
	"testing"
)

func TestLiveness(t *testing.T) {
	fault := func(start, end int) Fault { return Fault{Kind: FaultHook, Server: "A", Start: at(start), End: at(end)} }
	unlockErr := func(id, ms int) Call {
		return Call{ID: id, Prim: PrimLock, Op: OpUnlock, Res: []string{"A/l"}, Owners: []string{"x"}, Start: at(ms), End: at(ms + 1), Out: OutRedis}
	}
	tests := []struct {
		name   string
		holds  []Hold
		calls  []Call
		faults []Fault
		want   []string
	}{
		{"waiting while free", nil, []Call{waitCall(1, PrimLock, "A/l", "w", 0, 3000, OutCtx)}, nil, []string{VLiveness}},
		{"waiting while held", []Hold{hl(1, PrimLock, "A/l", "x", 0, 3000)}, []Call{waitCall(2, PrimLock, "A/l", "w", 10, 2900, OutCtx)}, nil, nil},
		{"held, then free too long", []Hold{hl(1, PrimLock, "A/l", "x", 0, 1000)}, []Call{waitCall(2, PrimLock, "A/l", "w", 10, 3000, OutCtx)}, nil, []string{VLiveness}},
		{"held, then free briefly", []Hold{hl(1, PrimLock, "A/l", "x", 0, 2000)}, []Call{waitCall(2, PrimLock, "A/l", "w", 10, 3000, OutOK)}, nil, nil},
		{"free gaps that add up but are each short", []Hold{hl(1, PrimLock, "A/l", "x", 1000, 1100), hl(2, PrimLock, "A/l", "y", 2000, 2100)},
			[]Call{waitCall(3, PrimLock, "A/l", "w", 0, 3000, OutCtx)}, nil, nil},
		{"a hold of another name does not help", []Hold{hl(1, PrimLock, "A/m", "x", 0, 3000)}, []Call{waitCall(2, PrimLock, "A/l", "w", 10, 2900, OutCtx)}, nil, []string{VLiveness}},
		{"excused by a fault and its recovery", nil, []Call{waitCall(1, PrimLock, "A/l", "w", 0, 6000, OutCtx)}, []Fault{fault(100, 600)}, nil},
		{"recovery ends", nil, []Call{waitCall(1, PrimLock, "A/l", "w", 0, 9000, OutCtx)}, []Fault{fault(100, 600)}, []string{VLiveness}},
		{"excused after an Unlock that failed", nil, []Call{unlockErr(2, 0), waitCall(1, PrimLock, "A/l", "w", 10, 4000, OutCtx)}, nil, nil},
		{"not excused by a failed Unlock of another name", nil, []Call{
			{ID: 2, Prim: PrimLock, Op: OpUnlock, Res: []string{"A/m"}, Owners: []string{"x"}, Start: at(0), End: at(1), Out: OutRedis},
			waitCall(1, PrimLock, "A/l", "w", 10, 4000, OutCtx)}, nil, []string{VLiveness}},
		{"one-shot TryLock is not waiting", nil, []Call{{ID: 1, Prim: PrimLock, Op: OpTryLock, Res: []string{"A/l"}, Owners: []string{"w"}, Start: at(0), End: at(3000), Out: OutNo}}, nil, nil},
		{"reader waits while only readers hold", []Hold{hl(1, PrimRead, "A/rw", "x", 0, 3000)}, []Call{waitCall(2, PrimRead, "A/rw", "w", 10, 2900, OutCtx)}, nil, []string{VLiveness}},
		{"writer waits while readers hold", []Hold{hl(1, PrimRead, "A/rw", "x", 0, 3000)}, []Call{waitCall(2, PrimWrite, "A/rw", "w", 10, 2900, OutCtx)}, nil, nil},
		{"reader waits while a writer holds", []Hold{hl(1, PrimWrite, "A/rw", "x", 0, 3000)}, []Call{waitCall(2, PrimRead, "A/rw", "w", 10, 2900, OutCtx)}, nil, nil},
		{"multilock waits while one member is held", []Hold{hl(1, PrimLock, "B/m", "x", 0, 3000)},
			[]Call{{ID: 2, Prim: PrimMulti, Op: OpLock, Res: []string{"A/m", "B/m"}, Owners: []string{"w1", "w2"}, Waiting: true, Start: at(10), End: at(2900), Out: OutCtx}}, nil, nil},
		{"multilock waits while both are free", nil,
			[]Call{{ID: 2, Prim: PrimMulti, Op: OpLock, Res: []string{"A/m", "B/m"}, Owners: []string{"w1", "w2"}, Waiting: true, Start: at(10), End: at(2900), Out: OutCtx}}, nil, []string{VLiveness}},
		{"a lease ends the hold", []Hold{func() Hold { h := hl(1, PrimLock, "A/l", "x", 0, 3000); h.LeaseLate = at(500); return h }()},
			[]Call{waitCall(2, PrimLock, "A/l", "w", 10, 2900, OutCtx)}, nil, []string{VLiveness}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(10000, tt.holds, tt.calls, tt.faults)
			expect(t, CheckLiveness(l, LiveSpans(l), DefaultLimits()), tt.want...)
		})
	}
}

func TestSemaphoreLiveness(t *testing.T) {
	set := Call{ID: 100, Prim: PrimSem, Op: OpSetPermits, Res: []string{"A/s"}, N: 3, Start: at(0), End: at(1), Out: OutOK}
	acq := func(id, n int, client string, start, end int, out Outcome) Call {
		return Call{ID: id, Prim: PrimSem, Op: OpAcquire, Res: []string{"A/s"}, N: n, Waiting: true, Client: client,
			Start: at(start), End: at(end), CtxEnd: at(end), Out: out}
	}
	tests := []struct {
		name   string
		holds  []Hold
		calls  []Call
		faults []Fault
		want   []string
	}{
		{"permits free", nil, []Call{set, acq(1, 2, "A1", 10, 3000, OutCtx)}, nil, []string{VLiveness}},
		{"too few free", []Hold{sem(1, "A/s", 2, 5, 3000)}, []Call{set, acq(2, 2, "A1", 10, 2900, OutCtx)}, nil, nil},
		{"enough free", []Hold{sem(1, "A/s", 2, 5, 3000)}, []Call{set, acq(2, 1, "A1", 10, 2900, OutCtx)}, nil, []string{VLiveness}},
		{"never initialised", nil, []Call{acq(1, 1, "A1", 10, 3000, OutCtx)}, nil, nil},
		{"an older waiter of the same Client goes first", []Hold{sem(1, "A/s", 2, 5, 3000)},
			[]Call{set, acq(2, 2, "A1", 6, 2990, OutCtx), acq(3, 1, "A1", 10, 2900, OutCtx)}, nil, nil},
		{"an older waiter of another Client does not block", []Hold{sem(1, "A/s", 2, 5, 3000)},
			[]Call{set, acq(2, 2, "A2", 6, 2990, OutCtx), acq(3, 1, "A1", 10, 2900, OutCtx)}, nil, []string{VLiveness}},
		{"permits of a failed acquire may be gone", nil,
			[]Call{set, acq(2, 2, "A2", 5, 6, OutRedis), acq(3, 2, "A1", 10, 2900, OutCtx)}, nil, nil},
		{"permits of a failed release may be gone", []Hold{func() Hold { h := sem(1, "A/s", 2, 5, 6); h.DoneOut = OutRedis; return h }()},
			[]Call{set, acq(3, 2, "A1", 10, 2900, OutCtx)}, nil, nil},
		{"after a restart the count is gone until set again", nil,
			[]Call{set, acq(3, 1, "A1", 6000, 8900, OutCtx)}, []Fault{{Kind: FaultRestart, Server: "A", Start: at(100), End: at(200)}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(10000, tt.holds, tt.calls, tt.faults)
			expect(t, CheckLiveness(l, LiveSpans(l), DefaultLimits()), tt.want...)
		})
	}
}

func TestRenewals(t *testing.T) {
	rn := func(ms int, field string) Renewal { return Renewal{T: at(ms), Client: "A1", Res: "A/l", Field: field} }
	lockCall := func(id, start, end int, out Outcome) Call {
		return Call{ID: id, Prim: PrimLock, Op: OpLock, Res: []string{"A/l"}, Owners: []string{"x"}, Start: at(start), End: at(end), Out: out}
	}
	mutexCall := func(client string, start, end int) Call {
		return Call{ID: 9, Client: client, Prim: PrimLock, Op: OpLock, Res: []string{"A/l"}, Owners: []string{PendingOwner + "9)"},
			Start: at(start), End: at(end), Out: OutCtx}
	}
	h := hl(1, PrimLock, "A/l", "x", 10, 3000) // Unlock returns at 3001
	relayedFrom := func(field, owner string, grant, end int) Hold {
		r := hl(2, PrimLock, "A/l", owner, grant, end)
		r.Relayed = field
		return r
	}
	relayedTo := func(owner string, grant, end int) Hold { return relayedFrom("x", owner, grant, end) }
	tests := []struct {
		name     string
		holds    []Hold
		calls    []Call
		renewals []Renewal
		want     []string
	}{
		{"while held", []Hold{h}, nil, []Renewal{rn(1000, "x"), rn(2000, "x")}, nil},
		{"in flight at the Unlock", []Hold{h}, nil, []Renewal{rn(3040, "x")}, nil},
		{"after the Unlock returned", []Hold{h}, nil, []Renewal{rn(3100, "x")}, []string{VRenewal}},
		{"reported once per owner", []Hold{h}, nil, []Renewal{rn(3100, "x"), rn(4100, "x"), rn(5100, "x")}, []string{VRenewal}},
		{"after the next Lock started", []Hold{h}, []Call{lockCall(5, 3500, 9000, OutCtx)}, []Renewal{rn(4000, "x")}, nil},
		{"during the acquire call", nil, []Call{lockCall(5, 100, 200, OutOK)}, []Renewal{rn(150, "x")}, nil},
		{"of another owner's field", []Hold{h}, nil, []Renewal{rn(1000, "y")}, []string{VStray}},
		{"a write view's field is its own", []Hold{hl(1, PrimRead, "A/l", "x", 10, 3000)}, nil, []Renewal{rn(1000, "x:write")}, []string{VStray}},
		{"write view while held", []Hold{hl(1, PrimWrite, "A/l", "x", 10, 3000)}, nil, []Renewal{rn(1000, "x:write")}, nil},
		{"soon after a cancelled acquire", nil, []Call{lockCall(5, 100, 200, OutCtx)}, []Renewal{rn(1000, "x")}, nil},
		{"long after a cancelled acquire", nil, []Call{lockCall(5, 100, 200, OutCtx)}, []Renewal{rn(6000, "x")}, []string{VStray}},
		{"an unnamed owner during a Mutex call that got no hold", nil, []Call{mutexCall("A1", 100, 2000)}, []Renewal{rn(1000, "m")}, nil},
		{"an unnamed owner soon after it", nil, []Call{mutexCall("A1", 100, 2000)}, []Renewal{rn(2500, "m")}, nil},
		{"an unnamed owner long after it", nil, []Call{mutexCall("A1", 100, 2000)}, []Renewal{rn(8000, "m")}, []string{VStray}},
		{"an unnamed owner during another Client's Mutex call", nil, []Call{mutexCall("A2", 100, 2000)}, []Renewal{rn(1000, "m")}, []string{VStray}},
		// Seed 1 at 8f37a34: a Mutex call's grant waited for the previous
		// hold's Unlock, the call's ctx ended, and the give-back relayed
		// the hold to another owner, recorded under the unnamed field.
		{"an unnamed owner during a Mutex call, its hold relayed later", []Hold{relayedFrom("m", "z", 3000, 4000)},
			[]Call{mutexCall("A1", 100, 2000)}, []Renewal{rn(1000, "m")}, nil},
		{"an unnamed owner long before its relayed hold", []Hold{relayedFrom("m", "z", 9000, 9500)},
			[]Call{mutexCall("A1", 100, 200)}, []Renewal{rn(8000, "m")}, []string{VStray}},
		// x's hold was relayed to y at 3000: Redis keeps y's under x's field.
		{"x's field while y holds it by relay", []Hold{h, relayedTo("y", 3000, 6000)}, nil, []Renewal{rn(4000, "x")}, nil},
		{"x's field after the relayed hold's Unlock", []Hold{h, relayedTo("y", 3000, 6000)}, nil, []Renewal{rn(6500, "x")}, []string{VRenewal}},
		// Seed 1 at e3d51e8: x was a MultiLock member whose give-back was
		// relayed to y; the MultiLock's rounds went on, took x's field
		// again after y's Unlock, and ended 100 ms before its renewal.
		{"x's field soon after an acquire call that outlived the relayed hold", []Hold{h, relayedTo("y", 3000, 6000)},
			[]Call{lockCall(5, 2000, 6500, OutCtx)}, []Renewal{rn(6600, "x")}, nil},
		{"x's field long after an acquire call that outlived the relayed hold", []Hold{h, relayedTo("y", 3000, 6000)},
			[]Call{lockCall(5, 2000, 6500, OutCtx)}, []Renewal{rn(12000, "x")}, []string{VStray}},
		{"y's own field while it holds x's by relay", []Hold{h, relayedTo("y", 3000, 6000)}, nil, []Renewal{rn(4000, "y")}, []string{VStray}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(10000, tt.holds, tt.calls, nil)
			l.Renewals = tt.renewals
			expect(t, CheckRenewals(l, DefaultLimits()), tt.want...)
		})
	}
}

func TestLivenessReaderBehindLocalWriter(t *testing.T) {
	reads := []Hold{hl(1, PrimRead, "A/rw", "x", 0, 3000)}
	writer := waitCall(2, PrimWrite, "A/rw", "w", 5, 2950, OutCtx)
	reader := waitCall(3, PrimRead, "A/rw", "r", 10, 2900, OutCtx)
	l := logOf(10000, reads, []Call{writer, reader}, nil)
	expect(t, CheckLiveness(l, LiveSpans(l), DefaultLimits()))
	writer.Client = "A2" // another Client's writer does not hold this reader back
	l = logOf(10000, reads, []Call{writer, reader}, nil)
	expect(t, CheckLiveness(l, LiveSpans(l), DefaultLimits()), VLiveness)
}
