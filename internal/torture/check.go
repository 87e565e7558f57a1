package torture

import (
	"fmt"
	"time"
)

// Limits are the checker's parameters.
type Limits struct {
	// Permits is every semaphore's N.
	Permits int
	// LostTolerance: an overlap this short is forgiven when the earlier hold
	// ended by Lost (the watcher goroutine records the close a little late).
	LostTolerance time.Duration
	// HangSlack: a call must return within its context's end plus this.
	HangSlack time.Duration
	// LiveGap: the longest a waiting call may go on waiting while what it
	// waits for is available.
	LiveGap time.Duration
	// Recovery: how long after a fault ends, a restart, or an Unlock/Release
	// that returned an error, liveness gaps are excused.
	Recovery time.Duration
	// RenewSlack: a renewal this soon after the Unlock returned may have been
	// in flight already.
	RenewSlack time.Duration
	// NoDeadline: an Unlock or Release whose context has no deadline must
	// return within this, whatever Redis does.
	NoDeadline time.Duration
}

// DefaultLimits are the limits the suite runs with.
func DefaultLimits() Limits {
	return Limits{
		Permits:       3,
		LostTolerance: 2 * time.Millisecond,
		HangSlack:     1500 * time.Millisecond,
		LiveGap:       1500 * time.Millisecond,
		Recovery:      5 * time.Second,
		RenewSlack:    50 * time.Millisecond,
		NoDeadline:    10 * time.Second,
	}
}

// The checks, as Violation.Check names them.
const (
	VExclusion = "mutual-exclusion"
	VPermits   = "semaphore-bound"
	VFencing   = "fencing"
	VClientTok = "client-fencing"
	VHang      = "hang"
	VLiveness  = "liveness"
	VRenewal   = "renewal-after-unlock"
	VStray     = "renewal-without-hold"
	VErrors    = "error"
	VFairQueue = "fair-queue"
	VResources = "resources"
	VWorkload  = "workload"
	VGhost     = "ghost-grant"
	VLateLost  = "lost-after-release"
	VLatch     = "countdown-latch"
	VStale     = "stale-grant"
	VFairOrder = "fair-order"
	VClash     = "refused-release-resent"
	VDropped   = "release-dropped"
	VUnnamed   = "outage-unnamed"
	VLostChan  = "lost-channel"
)

// Violation is one thing the checker found wrong.
type Violation struct {
	Check string
	At    time.Time // when it happened (zero for end-of-run checks)
	Msg   string
}

// String is "<check>: <message>".
func (v Violation) String() string { return v.Check + ": " + v.Msg }

// Check runs every check over the log and returns the violations in time
// order: CheckTopology with nothing relaxed (a single server loses no
// acknowledged write).
func Check(l *Log, lim Limits) []Violation { return CheckTopology(l, lim, Relaxations{}) }

// describe renders a span for a message: owner, interval and what ended it.
func (l *Log) describe(s Span) string {
	h := s.H
	extra := ""
	if h.Token != 0 {
		extra = fmt.Sprintf(" token %d", h.Token)
	}
	if h.Prim.Counted() {
		extra = fmt.Sprintf(" %d permit(s)", h.N)
	}
	if h.Relayed != "" {
		extra += " relayed under " + h.Relayed
	}
	return fmt.Sprintf("%s hold #%d of %s by %s (g%d)%s [%s, %s] ended by %s",
		h.Prim, h.ID, h.Res, h.Owner, h.G, extra, l.at(s.A), l.at(s.B), s.By)
}
