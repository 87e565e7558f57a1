package main

import (
	"cmp"
	"slices"
	"time"
)

// interval is one hold, for the concurrency charts: asked when the call
// began, start when it returned, end before the release.
type interval struct {
	asked, start, end time.Duration
	exclusive         bool // a writer's hold
}

// sample is what was going on at one instant.
type sample struct {
	At        float64 `json:"at_seconds"`
	Inside    int     `json:"shared_inside"`    // shared holders (readers, permits) inside
	Exclusive int     `json:"exclusive_inside"` // exclusive holders (writers) inside
	Waiting   int     `json:"waiting"`          // callers asking and not granted yet
}

// samples takes n evenly spaced snapshots of holds over [0, total), each in
// the middle of its slice of time.
func samples(holds []interval, total time.Duration, n int) []sample {
	out := make([]sample, n)
	step := total / time.Duration(n)
	for i := range out {
		t := step*time.Duration(i) + step/2
		s := sample{At: t.Seconds()}
		for _, h := range holds {
			switch {
			case h.asked <= t && t < h.start:
				s.Waiting++
			case h.start <= t && t < h.end && h.exclusive:
				s.Exclusive++
			case h.start <= t && t < h.end:
				s.Inside++
			}
		}
		out[i] = s
	}
	return out
}

// maxInside is the most holds in progress at once, exactly (a sweep over
// every start and end, not a sample).
func maxInside(holds []interval) int {
	type event struct {
		at    time.Duration
		delta int
	}
	events := make([]event, 0, 2*len(holds))
	for _, h := range holds {
		events = append(events, event{h.start, 1}, event{h.end, -1})
	}
	// At equal times, leaving comes before entering: touching holds were
	// not inside together.
	slices.SortFunc(events, func(x, y event) int { return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.delta, y.delta)) })
	n, most := 0, 0
	for _, ev := range events {
		n += ev.delta
		most = max(most, n)
	}
	return most
}
