package torture

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// strictLimits are CheckStrict's limits in these tests: a 1500ms watchdog,
// one replica, 100ms slack.
var strictLimits = StrictLimits{Watchdog: 1500 * time.Millisecond, Replicas: 1, LostSlack: 100 * time.Millisecond}

// TestCheckStrict: what CheckStrict judges that CheckTopology relaxes
// around a failover window, and what it still leaves alone.
func TestCheckStrict(t *testing.T) {
	window := Relaxations{Unsafe: []Window{{Interval: Interval{at(100), at(250)}, Why: "test"}}}
	fenced := func(h Hold, token uint64) Hold { h.Token = token; return h }
	leased := func(h Hold, until int) Hold {
		h.Lease, h.LeaseUntil, h.LeaseLate = time.Second, at(until), at(until+1)
		return h
	}
	tests := []struct {
		name          string
		holds         []Hold
		strict, relax []string // CheckStrict's and CheckTopology's verdicts
	}{
		{"overlap across a failover, earlier holder not told",
			[]Hold{hl(1, PrimLock, "A/l", "A1:x", 10, 300), hl(2, PrimLock, "A/l", "A2:y", 200, 400)}, []string{VExclusion}, nil},
		{"grant inside the window overlaps an open hold",
			[]Hold{hl(1, PrimLock, "A/l", "A1:x", 120, 300), hl(2, PrimLock, "A/l", "A2:y", 200, 400)}, []string{VExclusion}, nil},
		{"later grant after the earlier holder's Lost",
			[]Hold{lost(hl(1, PrimLock, "A/l", "A1:x", 10, 300), 150), hl(2, PrimLock, "A/l", "A2:y", 200, 400)}, nil, nil},
		{"later grant before the earlier holder's Lost",
			[]Hold{lost(hl(1, PrimLock, "A/l", "A1:x", 10, 300), 230), hl(2, PrimLock, "A/l", "A2:y", 200, 400)}, []string{VExclusion}, nil},
		{"later grant after the earlier fixed lease ran out",
			[]Hold{leased(hl(1, PrimLock, "A/l", "A1:x", 10, 300), 180), hl(2, PrimLock, "A/l", "A2:y", 200, 400)}, nil, nil},
		{"readers share across a failover",
			[]Hold{hl(1, PrimRead, "A/rw", "A1:x", 10, 300), hl(2, PrimRead, "A/rw", "A2:y", 200, 400)}, nil, nil},
		{"one Client's token back across a failover",
			[]Hold{fenced(hl(1, PrimFenced, "A/f", "A1:x", 10, 20), 5), fenced(hl(2, PrimFenced, "A/f", "A1:y", 300, 310), 3)},
			[]string{VClientTok, VFencing}, []string{VClientTok, VFencing}},
		// Tokens follow the server's clock: across Clients too.
		{"another Client's token back across a failover",
			[]Hold{fenced(hl(1, PrimFenced, "A/f", "A1:x", 10, 20), 5), fenced(hl(2, PrimFenced, "A/f", "A2:y", 300, 310), 3)},
			[]string{VFencing}, []string{VFencing}},
		{"another Client's token rising across a failover",
			[]Hold{fenced(hl(1, PrimFenced, "A/f", "A1:x", 10, 20), 5), fenced(hl(2, PrimFenced, "A/f", "A2:y", 300, 310), 8)}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(600, tt.holds, nil, nil)
			expect(t, CheckStrict(l, DefaultLimits(), window, strictLimits), tt.strict...)
			expect(t, CheckTopology(l, DefaultLimits(), window), tt.relax...)
		})
	}
}

// TestCheckStrictOverlapLength: the overlap is reported with its length.
func TestCheckStrictOverlapLength(t *testing.T) {
	l := logOf(600, []Hold{hl(1, PrimLock, "A/l", "A1:x", 10, 300), hl(2, PrimLock, "A/l", "A2:y", 200, 400)}, nil, nil)
	vs := CheckStrict(l, DefaultLimits(), Relaxations{}, strictLimits)
	if len(vs) != 1 || !strings.Contains(vs[0].Msg, "for 100ms") {
		t.Fatalf("violations %v, want one overlap of 100ms", vs)
	}
}

func TestCheckLostDeadline(t *testing.T) {
	// hold is a watchdog Lock hold of A/l by o, granted at 0 (its call
	// [-1, 0]) and held until end.
	hold := func(end int) Hold { return hl(1, PrimLock, "A/l", "A1:o", 0, end) }
	renew := func(ms, acks int) RenewReply {
		return RenewReply{Renewal: Renewal{T: at(ms), Client: "A1", Res: "A/l", Field: "A1:o"}, Acks: acks}
	}
	every500 := []RenewReply{renew(500, 1), renew(1000, 1), renew(1500, 2), renew(2000, 1), renew(2500, 1)}
	tests := []struct {
		name    string
		hold    Hold
		replies []RenewReply
		regrant int     // a reentrant grant returning at this ms (0: none)
		stalls  []Stall // the process's timers late (see Stall)
		want    []string
	}{
		{"released before the lease end", hold(1400), nil, 0, nil, nil},
		{"held past the lease end with no renewal, Lost never closed", hold(3000), nil, 0, nil, []string{VLostDeadline}},
		{"Lost closed at the lease end", lost(hold(3000), 1550), nil, 0, nil, nil},
		{"Lost closed late", lost(hold(3000), 1700), nil, 0, nil, []string{VLostDeadline}},
		{"renewed and confirmed throughout", hold(3000), every500, 0, nil, nil},
		{"renewals answered 1 but not confirmed by WAIT", hold(3000), []RenewReply{renew(500, 0), renew(1000, 0), renew(2000, 0)}, 0, nil, []string{VLostDeadline}},
		{"renewals sent without WAIT count as confirmed", hold(3000), []RenewReply{renew(500, -1), renew(1000, -1), renew(2000, -1)}, 0, nil, nil},
		{"a renewal after the end does not revive the hold", hold(3000), []RenewReply{renew(1600, 1), renew(2000, 1)}, 0, nil, []string{VLostDeadline}},
		{"another owner's renewals", hold(3000), []RenewReply{{Renewal: Renewal{T: at(500), Res: "A/l", Field: "A2:p"}, Acks: 1}}, 0, nil, []string{VLostDeadline}},
		{"a reentrant grant confirms", hold(2400), nil, 1000, nil, nil},
		{"fixed-lease holds are not judged", func() Hold { h := hold(3000); h.Lease = time.Second; return h }(), nil, 0, nil, nil},
		// Seed 1795969700300393091: a fair hold's Lost closed 129 ms past
		// its end, when every timer of the process ran 120-150 ms late.
		{"Lost closed late in a stall of the process's timers", lost(hold(3000), 1750), nil, 0, []Stall{{Due: at(1497), Woke: at(1680)}}, nil},
		{"Lost closed later than the slack after the stall", lost(hold(3000), 1800), nil, 0, []Stall{{Due: at(1497), Woke: at(1680)}}, []string{VLostDeadline}},
		{"a stall that ended before the deadline excuses nothing", lost(hold(3000), 1750), nil, 0, []Stall{{Due: at(1400), Woke: at(1450)}}, []string{VLostDeadline}},
		{"a stall that began after the deadline excuses nothing", lost(hold(3000), 1750), nil, 0, []Stall{{Due: at(1600), Woke: at(1700)}}, []string{VLostDeadline}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := []Call{{ID: 10, Op: OpLock, Out: OutOK, Start: at(-1), End: at(0), Holds: []int{1}}}
			if tt.regrant > 0 {
				calls = append(calls, Call{ID: 11, Op: OpLock, Out: OutOK, Start: at(tt.regrant - 1), End: at(tt.regrant), Holds: []int{1}})
			}
			l := logOf(5000, []Hold{tt.hold}, calls, nil)
			l.RenewReplies, l.Stalls = tt.replies, tt.stalls
			expect(t, CheckLostDeadline(l, strictLimits), tt.want...)
		})
	}
}

func TestCheckSettle(t *testing.T) {
	settle := func(names ...NameSettle) *Settle {
		return &Settle{From: at(1000), Within: 2 * time.Second, Names: names}
	}
	tests := []struct {
		name   string
		settle *Settle
		want   []string
	}{
		{"no settle recorded", nil, nil},
		{"every name free in time", settle(NameSettle{Name: "A/lock0", Free: at(1000)}, NameSettle{Name: "A/fair0", Free: at(2900)}), nil},
		{"a name free too late", settle(NameSettle{Name: "A/lock0", Free: at(1000)}, NameSettle{Name: "A/fair0", Free: at(3100)}), []string{VSettle}},
		{"a name never free", settle(NameSettle{Name: "A/fair0", Left: "redisson_lock_queue:{fair0} (list) [x]"}), []string{VSettle}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logOf(1000, nil, nil, nil)
			l.Settle = tt.settle
			expect(t, CheckSettle(l), tt.want...)
		})
	}
}

func TestLongestLease(t *testing.T) {
	l := logOf(1000, nil, []Call{{Lease: 2 * time.Second}, {Lease: 0}, {Lease: 7 * time.Second}}, nil)
	if got := longestLease(l, 1500*time.Millisecond); got != 7*time.Second {
		t.Errorf("longestLease = %v, want 7s", got)
	}
	if got := longestLease(logOf(1000, nil, nil, nil), 1500*time.Millisecond); got != 1500*time.Millisecond {
		t.Errorf("longestLease of no call = %v, want the watchdog", got)
	}
}

// TestHookRenewReplies: the hook reports a renewal answered 1 with what
// the WAIT in its round trip counted (-1 without one), nothing for a
// renewal answered 0 or failed, and tallies scripts with and without WAIT.
func TestHookRenewReplies(t *testing.T) {
	ctx := context.Background()
	renewal := func(key string, reply int64, err error) *redis.Cmd {
		c := redis.NewCmd(ctx, "evalsha", renewSHA, 1, key, 1500, "A1:o")
		if err != nil {
			c.SetErr(err)
		} else {
			c.SetVal(reply)
		}
		return c
	}
	wait := func(acks int64) *redis.Cmd {
		c := redis.NewCmd(ctx, "wait", 1, 500)
		c.SetVal(acks)
		return c
	}
	tests := []struct {
		name      string
		cmds      []redis.Cmder
		want      []int // Acks of each reply reported, in key order
		wait, not int64 // renewals tallied with and without WAIT
	}{
		{"confirmed", []redis.Cmder{renewal("a", 1, nil), wait(1)}, []int{1}, 1, 0},
		{"not confirmed", []redis.Cmder{renewal("a", 1, nil), renewal("b", 0, nil), wait(0)}, []int{0}, 2, 0},
		{"no WAIT", []redis.Cmder{renewal("a", 1, nil)}, []int{-1}, 0, 1},
		{"failed", []redis.Cmder{renewal("a", 0, ErrReplyLost), wait(1)}, nil, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []RenewReply
			h := &Hook{Server: "A", Name: "A1", Faults: &Faults{}, Sent: &SyncTally{}, OnRenewReply: func(r RenewReply) { got = append(got, r) }}
			err := h.fault(tt.cmds, func() error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("replies %+v, want acks %v", got, tt.want)
			}
			for i, r := range got {
				if r.Acks != tt.want[i] || r.Res != "A/a" || r.Field != "A1:o" {
					t.Errorf("reply %d = %+v, want acks %d on A/a", i, r, tt.want[i])
				}
			}
			if w, n := h.Sent.RenewalsWait.Load(), h.Sent.RenewalsNoWait.Load(); w != tt.wait || n != tt.not {
				t.Errorf("tallied %d with WAIT, %d without; want %d, %d", w, n, tt.wait, tt.not)
			}
		})
	}
}

// TestSyncTallyInfoFailed: a failed pipeline that carries INFO counts as a
// failed INFO read; a failed script or a good INFO does not.
func TestSyncTallyInfoFailed(t *testing.T) {
	ctx := context.Background()
	info := func() []redis.Cmder { return []redis.Cmder{redis.NewStringCmd(ctx, "info", "replication")} }
	script := func() []redis.Cmder { return []redis.Cmder{redis.NewCmd(ctx, "evalsha", "x", 0)} }
	for _, tt := range []struct {
		name string
		cmds []redis.Cmder
		err  error
		want int64
	}{
		{"INFO refused", info(), ErrRefused, 1},
		{"INFO answered", info(), nil, 0},
		{"script refused", script(), ErrRefused, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var tally SyncTally
			tally.infoOutcome(tt.cmds, tt.err)
			if got := tally.InfoFailed.Load(); got != tt.want {
				t.Fatalf("InfoFailed = %d, want %d", got, tt.want)
			}
		})
	}
}
