package torture

import (
	"slices"
	"time"
)

// Interval is the half-open time span [A, B).
type Interval struct{ A, B time.Time }

// Empty reports whether the interval contains no instant.
func (iv Interval) Empty() bool { return !iv.A.Before(iv.B) }

// Len is the interval's length (0 when empty).
func (iv Interval) Len() time.Duration {
	if iv.Empty() {
		return 0
	}
	return iv.B.Sub(iv.A)
}

// clip is iv ∩ w.
func (iv Interval) clip(w Interval) Interval {
	if iv.A.Before(w.A) {
		iv.A = w.A
	}
	if iv.B.After(w.B) {
		iv.B = w.B
	}
	return iv
}

// union sorts ivs and merges overlapping or touching intervals; empty ones
// are dropped. It reuses ivs' storage.
func union(ivs []Interval) []Interval {
	ivs = slices.DeleteFunc(ivs, Interval.Empty)
	slices.SortFunc(ivs, func(x, y Interval) int { return x.A.Compare(y.A) })
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 && !iv.A.After(out[n-1].B) {
			if iv.B.After(out[n-1].B) {
				out[n-1].B = iv.B
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// longestGap is the longest stretch of w that no interval of covered (sorted
// and merged, as union returns) touches.
func longestGap(w Interval, covered []Interval) Interval {
	var best Interval
	cur := w.A
	consider := func(end time.Time) {
		if g := (Interval{cur, end}).clip(w); g.Len() > best.Len() {
			best = g
		}
	}
	for _, c := range covered {
		if !c.B.After(w.A) {
			continue
		}
		if !c.A.Before(w.B) {
			break
		}
		consider(c.A)
		if c.B.After(cur) {
			cur = c.B
		}
	}
	consider(w.B)
	return best
}

// minTime is the earlier of a and b, ignoring zero times.
func minTime(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero(), a.Before(b):
		return a
	}
	return b
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
