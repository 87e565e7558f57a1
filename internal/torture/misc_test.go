package torture

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/scripts"
)

func TestIntervals(t *testing.T) {
	iv := func(a, b int) Interval { return Interval{at(a), at(b)} }
	got := union([]Interval{iv(50, 60), iv(0, 10), iv(10, 20), iv(5, 7), iv(30, 30), iv(55, 70)})
	if want := []Interval{iv(0, 20), iv(50, 70)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("union = %v, want %v", got, want)
	}
	tests := []struct {
		w       Interval
		covered []Interval
		want    Interval
	}{
		{iv(0, 100), nil, iv(0, 100)},
		{iv(0, 100), []Interval{iv(0, 100)}, Interval{}},
		{iv(0, 100), []Interval{iv(10, 20), iv(60, 70)}, iv(20, 60)},
		{iv(0, 100), []Interval{iv(-50, 40)}, iv(40, 100)},
		{iv(0, 100), []Interval{iv(30, 200)}, iv(0, 30)},
		{iv(20, 30), []Interval{iv(0, 10), iv(40, 50)}, iv(20, 30)},
	}
	for _, tt := range tests {
		if got := longestGap(tt.w, tt.covered); got.Len() != tt.want.Len() || (got.Len() > 0 && got != tt.want) {
			t.Errorf("longestGap(%v, %v) = %v, want %v", tt.w, tt.covered, got, tt.want)
		}
	}
}

func TestPlan(t *testing.T) {
	clients := map[string]int{"A": 3, "B": 2}
	for seed := int64(1); seed <= 50; seed++ {
		d := 2 * time.Minute
		p := Plan(seed, d, clients)
		if !reflect.DeepEqual(p, Plan(seed, d, clients)) {
			t.Fatalf("seed %d: two plans differ", seed)
		}
		lastRestart := time.Duration(-1)
		var prevEnd time.Duration
		for i, f := range p {
			if f.At < prevEnd {
				t.Fatalf("seed %d: %v starts before the previous fault ended (%v)", seed, f, prevEnd)
			}
			prevEnd = f.At + f.Dur
			if f.At >= d-quietTail {
				t.Fatalf("seed %d: %v in the quiet tail", seed, f)
			}
			switch f.Kind {
			case FaultRestart:
				if f.Server != "A" {
					t.Fatalf("seed %d: restart of %s", seed, f.Server)
				}
				if lastRestart >= 0 && f.At-lastRestart < restartEvery {
					t.Fatalf("seed %d: restarts %v apart", seed, f.At-lastRestart)
				}
				lastRestart = f.At
			case FaultHook, FaultPause:
				if f.Dur <= 0 || f.Dur > 2*time.Second {
					t.Fatalf("seed %d: fault %d lasts %v", seed, i, f.Dur)
				}
			}
		}
		if n := len(p); n < int(d/(6*time.Second)) {
			t.Fatalf("seed %d: only %d faults in %v", seed, n, d)
		}
	}
	if reflect.DeepEqual(Plan(1, time.Minute, clients), Plan(2, time.Minute, clients)) {
		t.Fatal("seeds 1 and 2 gave the same plan")
	}
}

func TestParseRenewal(t *testing.T) {
	tests := []struct {
		args []any
		ok   bool
		key  string
		who  string
	}{
		{[]any{"evalsha", scripts.Renew.Hash(), 1, "lock0", "3000", "uuid:7"}, true, "lock0", "uuid:7"},
		{[]any{"EVALSHA", scripts.Renew.Hash(), "1", "lock0", "3000", "uuid:7"}, true, "lock0", "uuid:7"},
		{[]any{"evalsha", scripts.RWRenew.Hash(), 2, "rw0", "{rw0}:uuid:7:rwlock_timeout", "3000", "uuid:7:write", "0"}, true, "rw0", "uuid:7:write"},
		{[]any{"evalsha", scripts.Unlock.Hash(), 1, "lock0", "3000", "uuid:7"}, false, "", ""},
		{[]any{"get", "lock0"}, false, "", ""},
		{[]any{"evalsha", scripts.Renew.Hash(), 1, "lock0"}, false, "", ""},
	}
	for _, tt := range tests {
		r, ok := ParseRenewal(tt.args)
		if ok != tt.ok || r.Res != tt.key || r.Field != tt.who {
			t.Errorf("ParseRenewal(%v) = %+v, %v", tt.args, r, ok)
		}
	}
	// EVAL carries the source: recognised by its SHA1.
	src := renewSource(t)
	if r, ok := ParseRenewal([]any{"eval", src, 1, "k", "3000", "o"}); !ok || r.Field != "o" {
		t.Errorf("EVAL of renew.lua not recognised: %+v %v", r, ok)
	}
}

// renewSource recovers renew.lua's source through the go-redis Script it is
// embedded in (Eval sends it as the command's second argument).
func renewSource(t *testing.T) string {
	t.Helper()
	var src string
	c := captureScripter{fn: func(args []any) { src = fmt.Sprint(args[1]) }}
	scripts.Renew.Eval(context.Background(), c, []string{"k"}, "1", "o")
	if src == "" {
		t.Fatal("could not capture the script source")
	}
	return src
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		ok   bool
		want Outcome
	}{
		{nil, true, OutOK},
		{nil, false, OutNo},
		{fmt.Errorf("lock %q: %w", "x", context.DeadlineExceeded), false, OutCtx},
		{fmt.Errorf("lock %q: %w", "x", context.Canceled), false, OutCtx},
		{fmt.Errorf("lock %q: %w", "x", lockactor.ErrNotHeld), false, OutNotHeld},
		{fmt.Errorf("lock %q: %w: %w", "x", lockactor.ErrNoQuorum, ErrRefused), false, OutNoQuorum},
		{fmt.Errorf("lock %q: %w", "x", lockactor.ErrInvalidArgument), false, OutInvalid},
		{fmt.Errorf("lock %q: %w", "x", lockactor.ErrClosed), false, OutClosed},
		{errors.Join(lockactor.ErrClosed, context.Canceled), false, OutClosed},
		{ErrReplyLost, false, OutRedis},
	}
	for _, tt := range tests {
		if got := Classify(tt.err, tt.ok); got != tt.want {
			t.Errorf("Classify(%v, %v) = %s, want %s", tt.err, tt.ok, got, tt.want)
		}
	}
}

func TestSpans(t *testing.T) {
	h := hl(1, PrimLock, "A/l", "x", 10, 100)
	h.LeaseUntil, h.LeaseLate = at(60), at(70)
	l := logOf(1000, []Hold{h}, nil, nil)
	if s := SafeSpans(l)[0]; s.B != at(60) || s.By != ByLease {
		t.Errorf("safe span = %v by %s, want the early lease end", s.Interval, s.By)
	}
	if s := LiveSpans(l)[0]; s.B != at(70) || s.By != ByLease {
		t.Errorf("live span = %v by %s, want the late lease end", s.Interval, s.By)
	}
	h = hl(1, PrimLock, "A/l", "x", 10, 100)
	l = logOf(1000, []Hold{h}, []Call{{ID: 2, Op: OpForceUnlock, Res: []string{"A/l"}, Start: at(40), End: at(45)}}, nil)
	if s := SafeSpans(l)[0]; s.B != at(40) || s.By != ByForce {
		t.Errorf("safe span = %v by %s, want the ForceUnlock's start", s.Interval, s.By)
	}
	if s := LiveSpans(l)[0]; s.B != at(101) || s.By != ByUnlock {
		t.Errorf("live span = %v by %s, want the Unlock's return: its OK says the hold outlived the ForceUnlock", s.Interval, s.By)
	}
	h.DoneOut = OutNotHeld
	l = logOf(1000, []Hold{h}, []Call{{ID: 2, Op: OpForceUnlock, Res: []string{"A/l"}, Start: at(40), End: at(45)}}, nil)
	if s := LiveSpans(l)[0]; s.B != at(45) || s.By != ByForce {
		t.Errorf("live span = %v by %s, want the ForceUnlock's end", s.Interval, s.By)
	}
	if s := LiveSpans(logOf(1000, []Hold{h}, nil, nil))[0]; s.B != at(101) || s.By != ByUnlock {
		t.Errorf("live span = %v by %s, want the Unlock's return", s.Interval, s.By)
	}
}

// captureScripter records what Script.Eval sends.
type captureScripter struct {
	redis.Scripter
	fn func(args []any)
}

func (c captureScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c.fn([]any{"eval", script})
	return redis.NewCmd(ctx)
}

// A kind-clash name whose Semaphore Release returned nil holds that
// Release's count; only those are spared the "count minted" check.
func TestClashReleasesGranted(t *testing.T) {
	for _, tc := range []struct {
		name string
		call Call
		want bool
	}{
		{name: "release ok on a clash name", call: Call{Prim: PrimSem, Op: OpRelease, Res: []string{"A/clash1.1"}, Out: OutOK}, want: true},
		{name: "release refused", call: Call{Prim: PrimSem, Op: OpRelease, Res: []string{"A/clash1.1"}, Out: OutRedis}},
		{name: "unlock ok", call: Call{Prim: PrimLock, Op: OpUnlock, Res: []string{"A/clash1.1"}, Out: OutOK}},
		{name: "release ok elsewhere", call: Call{Prim: PrimSem, Op: OpRelease, Res: []string{"A/sem0"}, Out: OutOK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clashReleasesGranted(&Log{Calls: []Call{tc.call}})
			name := strings.TrimPrefix(tc.call.Res[0], "A/")
			if got[name] != tc.want {
				t.Fatalf("granted[%q] = %v, want %v", name, got[name], tc.want)
			}
		})
	}
}
