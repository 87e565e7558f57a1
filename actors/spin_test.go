package actors

import (
	"testing"
	"time"
)

// TestSpinnerSteps: each wait lies in [d/2, d] for the backoff's step d,
// which doubles from lo up to hi; reset starts over; a local hold or a
// shorter remaining lease wins; a nil spinner (Lock) waits out the lease.
func TestSpinnerSteps(t *testing.T) {
	const ms = time.Millisecond
	s := newSpinner(2*ms, 16*ms)
	for round := range 2 {
		for _, d := range []time.Duration{2 * ms, 4 * ms, 8 * ms, 16 * ms, 16 * ms} {
			if got := s.retryIn(time.Minute, false); got < d/2 || got > d {
				t.Fatalf("round %d: wait %v, want within [%v, %v]", round, got, d/2, d)
			}
		}
		s.reset()
	}
	tests := []struct {
		name      string
		s         *spinner
		ttl       time.Duration
		localHold bool
		want      time.Duration
	}{
		{"the lease ends first", newSpinner(10*ms, 10*ms), 3 * ms, false, 3 * ms},
		{"a local owner holds", newSpinner(ms, 10*ms), time.Minute, true, time.Minute},
		{"Lock waits out the lease", nil, time.Minute, false, time.Minute},
	}
	for _, tc := range tests {
		if got := tc.s.retryIn(tc.ttl, tc.localHold); got != tc.want {
			t.Errorf("%s: retryIn = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := (*spinner)(nil).pause(); got != 0 {
		t.Errorf("Lock's pause after a run = %v, want 0", got)
	}
	if got := newSpinner(ms, 10*ms).pause(); got != 10*ms {
		t.Errorf("pause after a run = %v, want the cap", got)
	}
}

// TestSpinJitterSpreads: waits drawn at one step are not all the same, so
// waiters refused together do not retry in step.
func TestSpinJitterSpreads(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 50 {
		s := newSpinner(100*time.Millisecond, 100*time.Millisecond)
		seen[s.next()] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 first waits took %d distinct values", len(seen))
	}
}
