package torture

import (
	"slices"
	"testing"
	"time"
)

func TestMutualExclusion(t *testing.T) {
	force := func(ms int) Call {
		return Call{ID: 99, Prim: PrimLock, Op: OpForceUnlock, Res: []string{"A/l"}, Owners: []string{"z"}, Start: at(ms), End: at(ms + 1), Out: OutOK}
	}
	restart := Fault{Kind: FaultRestart, Server: "A", Start: at(50), End: at(60)}
	withLease := func(h Hold, leaseEnd int) Hold { h.LeaseUntil = at(leaseEnd); return h }
	tests := []struct {
		name   string
		holds  []Hold
		calls  []Call
		faults []Fault
		want   []string
	}{
		{"overlap", []Hold{hl(1, PrimLock, "A/l", "x", 10, 30), hl(2, PrimLock, "A/l", "y", 20, 40)}, nil, nil, []string{VExclusion}},
		{"back to back", []Hold{hl(1, PrimLock, "A/l", "x", 10, 30), hl(2, PrimLock, "A/l", "y", 30, 40)}, nil, nil, nil},
		{"different names", []Hold{hl(1, PrimLock, "A/l", "x", 10, 30), hl(2, PrimLock, "A/m", "y", 20, 40)}, nil, nil, nil},
		{"same name on two servers", []Hold{hl(1, PrimLock, "A/l", "x", 10, 30), hl(2, PrimLock, "B/l", "y", 20, 40)}, nil, nil, nil},
		{"same owner (reentrant views)", []Hold{hl(1, PrimWrite, "A/rw", "x", 10, 30), hl(2, PrimRead, "A/rw", "x", 20, 40)}, nil, nil, nil},
		{"readers share", []Hold{hl(1, PrimRead, "A/rw", "x", 10, 30), hl(2, PrimRead, "A/rw", "y", 20, 40)}, nil, nil, nil},
		{"reader and writer", []Hold{hl(1, PrimRead, "A/rw", "x", 10, 30), hl(2, PrimWrite, "A/rw", "y", 20, 40)}, nil, nil, []string{VExclusion}},
		{"writer and later reader", []Hold{hl(1, PrimWrite, "A/rw", "x", 10, 30), hl(2, PrimRead, "A/rw", "y", 29, 40)}, nil, nil, []string{VExclusion}},
		{"multilock member and plain lock", []Hold{hl(1, PrimMulti, "B/m", "x", 10, 30), hl(2, PrimLock, "B/m", "y", 20, 40)}, nil, nil, []string{VExclusion}},
		{"three-way overlap is two pairs", []Hold{hl(1, PrimFair, "A/f", "x", 10, 50), hl(2, PrimFair, "A/f", "y", 20, 30), hl(3, PrimFair, "A/f", "z", 35, 60)}, nil, nil, []string{VExclusion, VExclusion}},
		{"lost within tolerance", []Hold{lost(hl(1, PrimLock, "A/l", "x", 10, 30), 21), hl(2, PrimLock, "A/l", "y", 20, 40)}, nil, nil, nil},
		{"lost beyond tolerance", []Hold{lost(hl(1, PrimLock, "A/l", "x", 10, 30), 25), hl(2, PrimLock, "A/l", "y", 20, 40)}, nil, nil, []string{VExclusion}},
		{"lost before the other's grant", []Hold{lost(hl(1, PrimLock, "A/l", "x", 10, 30), 19), hl(2, PrimLock, "A/l", "y", 20, 40)}, nil, nil, nil},
		{"ended by ForceUnlock", []Hold{hl(1, PrimLock, "A/l", "x", 10, 30), hl(2, PrimLock, "A/l", "y", 20, 40)}, []Call{force(15)}, nil, nil},
		{"ForceUnlock after the overlap", []Hold{hl(1, PrimLock, "A/l", "x", 10, 30), hl(2, PrimLock, "A/l", "y", 20, 40)}, []Call{force(25)}, nil, []string{VExclusion}},
		{"ForceUnlock of another name", []Hold{hl(1, PrimLock, "A/m", "x", 10, 30), hl(2, PrimLock, "A/m", "y", 20, 40)}, []Call{force(15)}, nil, []string{VExclusion}},
		{"cut at a restart", []Hold{hl(1, PrimLock, "A/l", "x", 10, 100), hl(2, PrimLock, "A/l", "y", 400, 500)}, nil, []Fault{restart}, nil},
		{"grant near the restart is not trusted", []Hold{hl(1, PrimLock, "A/l", "x", 10, 100), hl(2, PrimLock, "A/l", "y", 55, 500), hl(3, PrimLock, "A/l", "z", 400, 450)}, nil, []Fault{restart}, nil},
		{"restart of the other server", []Hold{hl(1, PrimLock, "B/l", "x", 10, 100), hl(2, PrimLock, "B/l", "y", 80, 500)}, nil, []Fault{restart}, []string{VExclusion}},
		{"overlap after a restart", []Hold{hl(1, PrimLock, "A/l", "x", 400, 500), hl(2, PrimLock, "A/l", "y", 450, 550)}, nil, []Fault{restart}, []string{VExclusion}},
		{"fixed lease ran out", []Hold{withLease(hl(1, PrimLock, "A/l", "x", 10, 300), 100), hl(2, PrimLock, "A/l", "y", 150, 400)}, nil, nil, nil},
		{"fixed lease still running", []Hold{withLease(hl(1, PrimLock, "A/l", "x", 10, 300), 200), hl(2, PrimLock, "A/l", "y", 150, 400)}, nil, nil, []string{VExclusion}},
		{"never released", []Hold{{ID: 1, Prim: PrimLock, Res: "A/l", Owner: "x", AcqStart: at(9), Grant: at(10)}, hl(2, PrimLock, "A/l", "y", 150, 400)}, nil, nil, []string{VExclusion}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(1000, tt.holds, tt.calls, tt.faults)
			expect(t, CheckMutualExclusion(l, SafeSpans(l), DefaultLimits()), tt.want...)
		})
	}
}

func TestSemaphoreBound(t *testing.T) {
	restart := Fault{Kind: FaultRestart, Server: "A", Start: at(50), End: at(60)}
	tests := []struct {
		name   string
		holds  []Hold
		faults []Fault
		want   []string
	}{
		{"at the bound", []Hold{sem(1, "A/s", 1, 10, 30), sem(2, "A/s", 2, 20, 40)}, nil, nil},
		{"above the bound", []Hold{sem(1, "A/s", 2, 10, 30), sem(2, "A/s", 2, 20, 40)}, nil, []string{VPermits}},
		{"one report per excursion", []Hold{sem(1, "A/s", 2, 10, 30), sem(2, "A/s", 2, 20, 40), sem(3, "A/s", 1, 25, 45)}, nil, []string{VPermits}},
		{"two excursions", []Hold{sem(1, "A/s", 2, 10, 30), sem(2, "A/s", 2, 20, 40), sem(3, "A/s", 2, 100, 130), sem(4, "A/s", 2, 120, 140)}, nil, []string{VPermits, VPermits}},
		{"release and grant at the same instant", []Hold{sem(1, "A/s", 2, 10, 30), sem(2, "A/s", 2, 30, 40)}, nil, nil},
		{"generations are separate semaphores", []Hold{sem(1, "A/s.g0", 2, 10, 30), sem(2, "A/s.g1", 2, 20, 40)}, nil, nil},
		{"permits forgotten at a restart", []Hold{sem(1, "A/s", 3, 10, 100), sem(2, "A/s", 3, 400, 500)}, []Fault{restart}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(1000, tt.holds, nil, tt.faults)
			expect(t, CheckSemaphoreBound(l, SafeSpans(l), DefaultLimits()), tt.want...)
		})
	}
}

// fencedHold is a FencedLock hold of A/f with token, whose acquire call
// started at start.
func fencedHold(id int, owner string, token uint64, start, grant, end int) Hold {
	h := hl(id, PrimFenced, "A/f", owner, grant, end)
	h.AcqStart, h.Token = at(start), token
	return h
}

func TestFencingTokens(t *testing.T) {
	fenced := fencedHold
	restart := Fault{Kind: FaultRestart, Server: "A", Start: at(50), End: at(60)}
	tests := []struct {
		name   string
		holds  []Hold
		faults []Fault
		want   []string
	}{
		{"growing", []Hold{fenced(1, "x", 1, 5, 10, 20), fenced(2, "y", 2, 15, 25, 30), fenced(3, "x", 5, 31, 32, 40)}, nil, nil},
		{"shrinking in real time", []Hold{fenced(1, "x", 7, 5, 10, 20), fenced(2, "y", 3, 15, 25, 30)}, nil, []string{VFencing}},
		{"concurrent calls may order either way", []Hold{fenced(1, "x", 7, 5, 30, 40), fenced(2, "y", 3, 6, 20, 25)}, nil, nil},
		{"issued twice", []Hold{fenced(1, "x", 4, 5, 10, 20), fenced(2, "y", 4, 15, 25, 30)}, nil, []string{VFencing}},
		// Tokens follow the server's clock: a restart that forgot the
		// counter is no excuse.
		{"back after a restart that forgot the counter", []Hold{fenced(1, "x", 9, 5, 10, 20), fenced(2, "y", 1, 400, 410, 420)}, []Fault{restart}, []string{VFencing}},
		{"rising across a restart", []Hold{fenced(1, "x", 9, 5, 10, 20), fenced(2, "y", 12, 400, 410, 420)}, []Fault{restart}, nil},
		{"shrinking after a restart", []Hold{fenced(1, "x", 9, 400, 410, 420), fenced(2, "y", 2, 430, 440, 450)}, []Fault{restart}, []string{VFencing}},
		{"token 0 (Lost before it was read) is skipped", []Hold{fenced(1, "x", 9, 5, 10, 20), fenced(2, "y", 0, 25, 30, 40)}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(1000, tt.holds, nil, tt.faults)
			expect(t, CheckFencingTokens(l, SafeSpans(l)), tt.want...)
		})
	}
}

// TestClientTokens: one Client's tokens for a resource rise with real time,
// across a restart and a Sentinel switch too; another Client's are not
// compared with them.
func TestClientTokens(t *testing.T) {
	fenced := func(id int, owner string, token uint64, start, grant int) Hold {
		return fencedHold(id, owner, token, start, grant, grant+5)
	}
	restart := Fault{Kind: FaultRestart, Server: "A", Start: at(50), End: at(60)}
	tests := []struct {
		name   string
		holds  []Hold
		faults []Fault
		want   []string
	}{
		{"rising across handles", []Hold{fenced(1, "c1:1", 4, 5, 10), fenced(2, "c1:2", 5, 20, 25), fenced(3, "c1:1", 9, 30, 35)}, nil, nil},
		{"back within a Client", []Hold{fenced(1, "c1:1", 7, 5, 10), fenced(2, "c1:2", 3, 20, 25)}, nil, []string{VClientTok}},
		{"repeated within a Client", []Hold{fenced(1, "c1:1", 7, 5, 10), fenced(2, "c1:1", 7, 20, 25)}, nil, []string{VClientTok}},
		{"back across a restart", []Hold{fenced(1, "c1:1", 9, 5, 10), fenced(2, "c1:2", 1, 400, 410)}, []Fault{restart}, []string{VClientTok}},
		{"another Client may go back", []Hold{fenced(1, "c1:1", 9, 5, 10), fenced(2, "c2:1", 1, 400, 410)}, []Fault{restart}, nil},
		{"concurrent calls may order either way", []Hold{fenced(1, "c1:1", 7, 5, 30), fenced(2, "c1:2", 3, 6, 20)}, nil, nil},
		{"token 0 is skipped", []Hold{fenced(1, "c1:1", 9, 5, 10), fenced(2, "c1:2", 0, 25, 30)}, nil, nil},
		{"resources are apart", []Hold{fenced(1, "c1:1", 9, 5, 10), func() Hold { h := fenced(2, "c1:1", 1, 25, 30); h.Res = "A/g"; return h }()}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(1000, tt.holds, nil, tt.faults)
			expect(t, CheckClientTokens(l), tt.want...)
		})
	}
	// CheckTopology judges both inside an Unsafe window too: one Client's
	// tokens, and every Client's (tokens follow the server's clock).
	for _, tt := range []struct {
		second string
		want   []string
	}{
		{"c1:2", []string{VClientTok, VFencing}},
		{"c2:1", []string{VFencing}},
	} {
		l := logOf(1000, []Hold{fenced(1, "c1:1", 24, 5, 10), fenced(2, tt.second, 21, 100, 110)}, nil, nil)
		rx := Relaxations{Unsafe: []Window{{Interval: Interval{A: at(50), B: at(120)}, Why: "switch"}}}
		var got []string
		for _, v := range CheckTopology(l, DefaultLimits(), rx) {
			got = append(got, v.Check)
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(got, want) {
			t.Fatalf("CheckTopology across an Unsafe window, second hold by %s: %v, want %v", tt.second, got, want)
		}
	}
}

func TestHangs(t *testing.T) {
	call := func(ctxEnd, end int) Call {
		c := waitCall(1, PrimLock, "A/l", "x", 0, end, OutCtx)
		c.CtxEnd = at(ctxEnd)
		if end < 0 {
			c.End = time.Time{}
		}
		return c
	}
	tests := []struct {
		name string
		call Call
		want []string
	}{
		{"on time", call(1000, 1000), nil},
		{"within the slack", call(1000, 2400), nil},
		{"late", call(1000, 2600), []string{VHang}},
		{"never returned", call(1000, -1), []string{VHang}},
		{"no context end recorded", Call{ID: 1, Start: at(0), End: at(9000)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(5000, nil, []Call{tt.call}, nil)
			expect(t, CheckHangs(l, DefaultLimits()), tt.want...)
		})
	}
}

func TestCallErrors(t *testing.T) {
	unlock := func(id int, owner string, ms int, out Outcome, holds ...int) Call {
		return Call{ID: id, Prim: PrimLock, Op: OpUnlock, Res: []string{"A/l"}, Owners: []string{owner},
			Start: at(ms), End: at(ms + 1), Out: out, Holds: holds}
	}
	h := hl(1, PrimLock, "A/l", "x", 10, 30)
	tests := []struct {
		name  string
		holds []Hold
		calls []Call
		want  []string
	}{
		{"invalid argument", nil, []Call{{ID: 1, Op: OpLock, Out: OutInvalid, Res: []string{"A/l"}}}, []string{VErrors}},
		{"closed", nil, []Call{{ID: 1, Op: OpLock, Out: OutClosed, Res: []string{"A/l"}}}, []string{VErrors}},
		{"panic", nil, []Call{{ID: 1, Op: OpUnlock, Out: OutPanic, Res: []string{"A/l"}}}, []string{VErrors}},
		{"redis errors and ctx are allowed", nil, []Call{{ID: 1, Op: OpLock, Out: OutRedis}, {ID: 2, Op: OpLock, Out: OutCtx}}, nil},
		{"not held without a cause", []Hold{h}, []Call{unlock(2, "x", 30, OutNotHeld, 1)}, []string{VErrors}},
		{"not held after Lost", []Hold{lost(h, 20)}, []Call{unlock(2, "x", 30, OutNotHeld, 1)}, nil},
		{"not held after a ForceUnlock", []Hold{h}, []Call{
			{ID: 3, Op: OpForceUnlock, Res: []string{"A/l"}, Owners: []string{"z"}, Start: at(20), End: at(21), Out: OutOK},
			unlock(2, "x", 30, OutNotHeld, 1)}, nil},
		{"not held after an ambiguous call of the owner", []Hold{h}, []Call{
			unlock(3, "x", 15, OutRedis), unlock(2, "x", 30, OutNotHeld, 1)}, nil},
		{"an ambiguous call before the hold explains nothing", []Hold{h}, []Call{
			unlock(3, "x", 2, OutRedis), unlock(2, "x", 30, OutNotHeld, 1)}, []string{VErrors}},
		{"another owner's ambiguous call explains nothing", []Hold{h}, []Call{
			unlock(3, "y", 5, OutRedis), unlock(2, "x", 30, OutNotHeld, 1)}, []string{VErrors}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(1000, tt.holds, tt.calls, nil)
			expect(t, CheckCallErrors(l, SafeSpans(l)), tt.want...)
		})
	}
	t.Run("a watchdog lease that ran out during the Unlock", func(t *testing.T) {
		// Granted by a script seen at 10 with a 15ms lease, renewed at 20:
		// the lease ends at 35, inside an Unlock of [30, 40) and not of
		// [30, 33); with no renewal it ends at 25, before the Unlock began.
		grant := LeaseRun{T: at(10), Script: "lock", Grants: true, Res: "A/l", Owner: "x", Lease: 15 * time.Millisecond}
		renew := Renewal{T: at(20), Client: "A1", Res: "A/l", Field: "x"}
		long := func(end int) Call { c := unlock(2, "x", 30, OutNotHeld, 1); c.End = at(end); return c }
		for _, tc := range []struct {
			name     string
			renewals []Renewal
			end      int
			want     []string
		}{
			{"ran out inside the call", []Renewal{renew}, 40, nil},
			{"still running when the call ended", []Renewal{renew}, 33, []string{VErrors}},
			{"ran out before the call began", nil, 40, []string{VErrors}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				l := logOf(1000, []Hold{h}, []Call{long(tc.end)}, nil)
				l.Runs, l.Renewals = []LeaseRun{grant}, tc.renewals
				expect(t, CheckCallErrors(l, SafeSpans(l)), tc.want...)
			})
		}
	})
	t.Run("not held after a restart", func(t *testing.T) {
		l := logOf(1000, []Hold{h}, []Call{unlock(2, "x", 30, OutNotHeld, 1)}, []Fault{{Kind: FaultRestart, Server: "A", Start: at(25), End: at(28)}})
		expect(t, CheckCallErrors(l, SafeSpans(l)))
	})
}
