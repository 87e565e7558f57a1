package actors

import (
	"slices"
	"testing"
	"time"
)

// TestBackoff: each step doubles the last delay within [lo, hi], a hi below
// lo counts as lo, and reset starts again from lo. The rows with the
// package's constants pin the spacing of every retry that uses one.
func TestBackoff(t *testing.T) {
	const ms = time.Millisecond
	type step struct {
		lo, hi time.Duration
		reset  bool // reset instead of stepping; want is ignored
		want   time.Duration
	}
	steps := func(lo, hi time.Duration, want ...time.Duration) []step {
		var out []step
		for _, w := range want {
			out = append(out, step{lo: lo, hi: hi, want: w})
		}
		return out
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"owed releases: 20ms doubling to 1s", steps(owedMin, owedMax, 20*ms, 40*ms, 80*ms, 160*ms, 320*ms, 640*ms, time.Second, time.Second)},
		{"settlements: 10ms doubling to 1s", steps(resolveMin, resolveMax, 10*ms, 20*ms, 40*ms, 80*ms, 160*ms, 320*ms, 640*ms, time.Second, time.Second)},
		{"fair retries: 20ms doubling to 1s", steps(fairMinBackoff, fairMaxBackoff, 20*ms, 40*ms, 80*ms, 160*ms, 320*ms, 640*ms, time.Second)},
		{"a ceiling below lo counts as lo", steps(owedMin, 5*ms, 20*ms, 20*ms, 20*ms)},
		{"a ceiling between steps caps the doubling", steps(owedMin, 50*ms, 20*ms, 40*ms, 50*ms, 50*ms)},
		{"a lower ceiling later cuts the delay", append(steps(owedMin, owedMax, 20*ms, 40*ms, 80*ms), steps(owedMin, 30*ms, 30*ms, 30*ms)...)},
		{"reset starts again from lo", slices.Concat(
			steps(fairMinBackoff, fairMaxBackoff, 20*ms, 40*ms, 80*ms),
			[]step{{reset: true}},
			steps(fairMinBackoff, fairMaxBackoff, 20*ms, 40*ms))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b backoff
			for i, s := range tt.steps {
				if s.reset {
					b.reset()
					continue
				}
				if got := b.next(s.lo, s.hi); got != s.want {
					t.Fatalf("step %d: next(%v, %v) = %v, want %v", i, s.lo, s.hi, got, s.want)
				}
			}
		})
	}
}
