package actors

import (
	"testing"
	"time"
)

func TestRedlockValidity(t *testing.T) {
	start := epoch.Add(time.Hour)
	tests := []struct {
		name     string
		lease    time.Duration
		elapsed  time.Duration // the round's own time
		now      time.Duration // when Validity is read, after start
		validity time.Duration // validity(lease, elapsed)
		left     time.Duration // ValidityLeft at start+now
	}{
		{"instant round, read at once", 10 * time.Second, 0, 0, 10*time.Second - 102*time.Millisecond, 10*time.Second - 102*time.Millisecond},
		// The round's time is subtracted once: read when the round ends,
		// what is left is exactly the validity.
		{"round of 40ms, read as it ends", 10 * time.Second, 40 * time.Millisecond, 40 * time.Millisecond, 10*time.Second - 142*time.Millisecond, 10*time.Second - 142*time.Millisecond},
		{"read 2s later", 10 * time.Second, 40 * time.Millisecond, 2040 * time.Millisecond, 10*time.Second - 142*time.Millisecond, 8*time.Second - 142*time.Millisecond},
		{"read after the end", time.Second, 10 * time.Millisecond, 2 * time.Second, time.Second - 22*time.Millisecond, 0},
		{"round ate the lease", 100 * time.Millisecond, 99 * time.Millisecond, 99 * time.Millisecond, -2 * time.Millisecond, 0},
		{"drift alone", 200 * time.Millisecond, 0, 0, 196 * time.Millisecond, 196 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := validity(tc.lease, tc.elapsed); got != tc.validity {
				t.Errorf("validity(%v, %v) = %v, want %v", tc.lease, tc.elapsed, got, tc.validity)
			}
			until := validUntil(start, tc.lease)
			if got := ValidityLeft(int64(until.Sub(epoch)), start.Add(tc.now)); got != tc.left {
				t.Errorf("ValidityLeft at start+%v = %v, want %v", tc.now, got, tc.left)
			}
		})
	}
	if got := ValidityLeft(0, start); got != 0 {
		t.Errorf("ValidityLeft of no hold = %v, want 0", got)
	}
}
