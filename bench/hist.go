package main

import (
	"encoding/json"
	"math/bits"
	"time"
)

// histBuckets covers every int64: 64 exact buckets, then 32 per power of two
// (about 3% resolution).
const histBuckets = 64 + 58*32

// hist is a mergeable log-linear latency histogram in nanoseconds, so that
// processes can send theirs as JSON and the parent can merge them.
type hist struct {
	counts [histBuckets]int64
	n      int64
	max    int64
}

func bucketOf(v int64) int {
	if v < 64 {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 6 // >= 1
	m := v >> e                    // in [32, 63]
	return 64 + (e-1)*32 + int(m-32)
}

// bucketMid is the middle of bucket i's range.
func bucketMid(i int) int64 {
	if i < 64 {
		return int64(i)
	}
	e := (i-64)/32 + 1
	m := int64((i-64)%32 + 32)
	return m<<e + (int64(1)<<e)/2
}

// add records one duration.
func (h *hist) add(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)]++
	h.n++
	h.max = max(h.max, v)
}

// merge adds o's samples to h.
func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile is the q-th quantile (0..1); the maximum is exact.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := int64(q*float64(h.n-1)) + 1
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(bucketMid(i), h.max))
		}
	}
	return time.Duration(h.max)
}

// histJSON is the sparse wire form of a hist.
type histJSON struct {
	Buckets map[int]int64 `json:"buckets"`
	N       int64         `json:"n"`
	Max     int64         `json:"max"`
}

// MarshalJSON writes only the non-empty buckets.
func (h *hist) MarshalJSON() ([]byte, error) {
	w := histJSON{Buckets: map[int]int64{}, N: h.n, Max: h.max}
	for i, c := range h.counts {
		if c != 0 {
			w.Buckets[i] = c
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the sparse form.
func (h *hist) UnmarshalJSON(b []byte) error {
	var w histJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*h = hist{n: w.N, max: w.Max}
	for i, c := range w.Buckets {
		if i >= 0 && i < histBuckets {
			h.counts[i] = c
		}
	}
	return nil
}
