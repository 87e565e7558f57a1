package torture

import (
	"testing"
	"time"
)

func TestLateLost(t *testing.T) {
	// lateLost is hold 1 of A/x by owner o, granted at 0, its last Unlock
	// called at 100 and returning out at 110, whose Lost closed afterwards.
	lateLost := func(prim Prim, out Outcome) Hold {
		h := hl(1, prim, "A/x", "o", 0, 100)
		h.Done, h.DoneOut, h.LostLate = at(110), out, true
		return h
	}
	withheld := func(ms int, key, owner, reply string) Withheld {
		return Withheld{T: at(ms), Client: "A1", Server: "A", Key: key, Reply: reply,
			Args: []string{"evalsha", "sha", "3", key, "chan", "latch", "0", "30000", owner}}
	}
	tests := []struct {
		name     string
		hold     Hold
		withheld []Withheld
		want     []string
	}{
		{"Unlock returned nil", lateLost(PrimLock, OutOK), nil, []string{VLateLost}},
		{"Unlock failed, nothing known", lateLost(PrimLock, OutRedis), nil, nil},
		{"release ran, reply withheld", lateLost(PrimFenced, OutRedis), []Withheld{withheld(105, "x", "o", "1")}, []string{VLateLost}},
		{"release found nothing held", lateLost(PrimLock, OutRedis), []Withheld{withheld(105, "x", "o", "nil")}, nil},
		{"another owner's release", lateLost(PrimLock, OutRedis), []Withheld{withheld(105, "x", "p", "1")}, nil},
		{"another name's release", lateLost(PrimLock, OutRedis), []Withheld{withheld(105, "y", "o", "1")}, nil},
		{"a release before this Unlock", lateLost(PrimLock, OutRedis), []Withheld{withheld(50, "x", "o", "1")}, nil},
		{"fixed lease outlived while the Unlock was out", func() Hold {
			h := lateLost(PrimLock, OutOK)
			h.Lease, h.LeaseUntil, h.LostInUnlock = 105*time.Millisecond, at(104), true
			return h
		}(), nil, nil},
		{"fixed lease not yet outlived when the Unlock returned", func() Hold {
			h := lateLost(PrimLock, OutOK)
			h.Lease, h.LeaseUntil, h.LostInUnlock = 200*time.Millisecond, at(199), true
			return h
		}(), nil, []string{VLateLost}},
		{"fixed lease outlived, Lost closed after the Unlock returned", func() Hold {
			h := lateLost(PrimLock, OutOK)
			h.Lease, h.LeaseUntil = 105*time.Millisecond, at(104)
			return h
		}(), nil, []string{VLateLost}},
		{"Lost seen before the Unlock", func() Hold { h := hl(1, PrimLock, "A/x", "o", 0, 100); h.Lost = at(90); return h }(), nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := logOf(1000, []Hold{tc.hold}, nil, nil)
			l.Withheld = tc.withheld
			expect(t, CheckLateLost(l), tc.want...)
		})
	}
}

func TestScriptArg(t *testing.T) {
	// handoff.lua through latch.lua: KEYS name, latch; ARGV lease, owner,
	// next, nextLease, seq, keep.
	args := []any{"evalsha", "abc", 2, "lock0", "latch", 30000, "o1", "o2", 300, 17, 60000}
	tests := []struct {
		i    int
		want int64
		ok   bool
	}{
		{1, 30000, true},
		{4, 300, true},
		{6, 60000, true},
		{7, 0, false},
		{2, 0, false}, // not an integer
	}
	for _, tc := range tests {
		if got, ok := scriptArg(args, tc.i); got != tc.want || ok != tc.ok {
			t.Errorf("ARGV[%d] = %d, %v; want %d, %v", tc.i, got, ok, tc.want, tc.ok)
		}
	}
}
