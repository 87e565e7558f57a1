package torture

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor/internal/syncx"
)

// recorder is one goroutine's part of the log. Its owner appends; the runner
// snapshots it at the end under mu (a worker stuck in a call must not stop the
// snapshot, and what it has not finished shows as a call that never
// returned).
type recorder struct {
	g   int
	ids *atomic.Int64

	mu    sync.Mutex
	calls []Call
	holds []Hold
	lost  []<-chan struct{} // holds[i]'s Lost channel (nil for permits)
}

// callCtx is one call's context: a deadline, and optionally a cancel at a
// random point, with the moment the context actually ended.
type callCtx struct {
	ctx      context.Context
	cancel   context.CancelFunc
	deadline time.Time
	timer    *time.Timer
	cancelAt atomic.Int64 // UnixNano of the early cancel, once it fired
}

// newCallCtx returns a context that ends after deadline, or after cancelAfter
// when that is > 0 (a caller that gives up at a random point).
func newCallCtx(deadline, cancelAfter time.Duration) *callCtx {
	cc := &callCtx{}
	if deadline == 0 {
		cc.ctx, cc.cancel = context.WithCancel(context.Background())
	} else {
		cc.deadline = time.Now().Add(deadline)
		cc.ctx, cc.cancel = context.WithDeadline(context.Background(), cc.deadline)
	}
	if cancelAfter > 0 {
		cc.timer = time.AfterFunc(cancelAfter, func() {
			cc.cancelAt.Store(time.Now().UnixNano())
			cc.cancel()
		})
	}
	return cc
}

// ended is when the context ended (or is due to): the deadline or the early
// cancel, whichever came first.
func (cc *callCtx) ended() time.Time {
	if ns := cc.cancelAt.Load(); ns != 0 {
		if t := time.Unix(0, ns); cc.deadline.IsZero() || t.Before(cc.deadline) {
			return t
		}
	}
	return cc.deadline
}

func (cc *callCtx) done() {
	if cc.timer != nil {
		cc.timer.Stop()
	}
	cc.cancel()
}

// do records c, runs f under cc and records its result. It returns the
// outcome and the call's index in the recorder.
func (rec *recorder) do(c Call, cc *callCtx, f func(context.Context) (bool, error)) (Outcome, int) {
	c.G = rec.g
	c.ID = int(rec.ids.Add(1))
	c.CtxEnd = cc.deadline
	rec.mu.Lock()
	c.Start = time.Now()
	rec.calls = append(rec.calls, c)
	i := len(rec.calls) - 1
	rec.mu.Unlock()

	var ok bool
	var err error
	panicked := false
	func() {
		defer func() {
			if p := recover(); p != nil {
				panicked, err = true, fmt.Errorf("panic: %v", p)
			}
		}()
		ok, err = f(cc.ctx)
	}()
	end := time.Now()
	out := Classify(err, ok)
	if panicked {
		out = OutPanic
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	call := &rec.calls[i]
	call.End, call.Out, call.CtxEnd = end, out, cc.ended()
	if err != nil {
		call.Err = err.Error()
	}
	return out, i
}

// call returns a copy of call i (for the caller's own bookkeeping).
func (rec *recorder) call(i int) Call {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.calls[i]
}

// setToken and link complete call i after the fact.
func (rec *recorder) setToken(i int, token uint64) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.calls[i].Token = token
}

// setOwners names call i's owners once it returned them (a permit's id).
func (rec *recorder) setOwners(i int, owners ...string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.calls[i].Owners = owners
}

func (rec *recorder) link(i int, holdID int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.calls[i].Holds = append(rec.calls[i].Holds, holdID)
}

// openHold is a hold in progress with the goroutine that watches its Lost
// channel until the hold ends.
type openHold struct {
	rec    *recorder
	i      int // index in rec.holds
	id     int
	lost   <-chan struct{}
	stop   chan struct{}
	exited chan struct{}
	lostAt atomic.Int64
}

// open starts a hold granted by call i and watches lost.
func (rec *recorder) open(h Hold, callIdx int, lost <-chan struct{}) *openHold {
	c := rec.call(callIdx)
	h.ID, h.G = int(rec.ids.Add(1)), rec.g
	h.AcqStart, h.Grant = c.Start, c.End
	if h.N == 0 {
		h.N = 1
	}
	if c.Lease > 0 {
		h.Lease, h.LeaseUntil, h.LeaseLate = c.Lease, c.Start.Add(leaseFloor(c.Lease)), c.End.Add(c.Lease)
	}
	rec.mu.Lock()
	rec.holds = append(rec.holds, h)
	rec.lost = append(rec.lost, lost)
	oh := &openHold{rec: rec, i: len(rec.holds) - 1, id: h.ID, lost: lost, stop: make(chan struct{}), exited: make(chan struct{})}
	rec.mu.Unlock()
	rec.link(callIdx, h.ID)
	go func() {
		defer close(oh.exited)
		select {
		case <-lost:
			oh.lostAt.Store(time.Now().UnixNano())
		case <-oh.stop:
		}
	}()
	return oh
}

// regrant records a reentrant grant by call i: a fixed lease restarts there.
func (oh *openHold) regrant(callIdx int) {
	c := oh.rec.call(callIdx)
	oh.rec.link(callIdx, oh.id)
	oh.rec.mu.Lock()
	defer oh.rec.mu.Unlock()
	h := &oh.rec.holds[oh.i]
	if c.Lease > 0 {
		h.Lease, h.LeaseUntil, h.LeaseLate = c.Lease, c.Start.Add(leaseFloor(c.Lease)), c.End.Add(c.Lease)
	}
}

// leaseFloor is the least a lease of d keeps a key in Redis from when its
// script runs: the library sends whole milliseconds (rounded down), and
// Redis counts a PEXPIRE from its clock's current millisecond, up to one
// before the script's real time.
func leaseFloor(d time.Duration) time.Duration {
	return d.Truncate(time.Millisecond) - time.Millisecond
}

// extended applies an Extend (call i) to the hold's fixed-lease bounds.
// Redis set the new TTL, if at all, somewhere between the call's start and
// its reply: a success moves both bounds there. A refusal of the call
// itself (ErrInvalidArgument) sent nothing. Any other result may hide a
// renewal that ran (not held: also a reply that came back after the new
// lease, a shorter one perhaps; an error or an ended ctx: a lost reply),
// so the hold keeps the earlier of the two ends and the later of the two
// latest ends.
func (oh *openHold) extended(callIdx int) {
	c := oh.rec.call(callIdx)
	oh.rec.link(callIdx, oh.id)
	oh.rec.mu.Lock()
	defer oh.rec.mu.Unlock()
	h := &oh.rec.holds[oh.i]
	until, late := c.Start.Add(leaseFloor(c.Lease)), c.End.Add(c.Lease)
	switch c.Out {
	case OutOK:
		h.LeaseUntil, h.LeaseLate = until, late
	case OutInvalid:
	default:
		h.LeaseUntil = minTime(h.LeaseUntil, until)
		h.LeaseLate = maxTime(h.LeaseLate, late)
	}
}

// end marks the hold's end (just before its last Unlock or Release), stops
// the watcher and keeps a Lost seen before the end.
func (oh *openHold) end(skipped bool) {
	now := time.Now()
	close(oh.stop)
	<-oh.exited
	if syncx.Closed(oh.lost) && oh.lostAt.Load() == 0 {
		// Closed by now, but the watcher took the stop: count it as closed
		// at End (the span ends there either way).
		oh.lostAt.Store(now.UnixNano())
	}
	oh.rec.mu.Lock()
	defer oh.rec.mu.Unlock()
	h := &oh.rec.holds[oh.i]
	h.End, h.Skipped = now, skipped
	if ns := oh.lostAt.Load(); ns != 0 {
		if t := time.Unix(0, ns); !t.After(now) {
			h.Lost = t
		}
	}
	if skipped {
		h.Done, h.DoneOut = now, OutOK
	}
}

// leaseUntil is the earliest moment the hold's fixed lease can run out
// in Redis (zero for a watchdog hold).
func (oh *openHold) leaseUntil() time.Time {
	oh.rec.mu.Lock()
	defer oh.rec.mu.Unlock()
	return oh.rec.holds[oh.i].LeaseUntil
}

// leaseLate is the latest moment the hold's fixed lease can run out in
// Redis (zero for a watchdog hold).
func (oh *openHold) leaseLate() time.Time {
	oh.rec.mu.Lock()
	defer oh.rec.mu.Unlock()
	return oh.rec.holds[oh.i].LeaseLate
}

// probed records a look at Redis right after the grant.
func (oh *openHold) probed(at time.Time, gone bool) {
	oh.rec.mu.Lock()
	defer oh.rec.mu.Unlock()
	h := &oh.rec.holds[oh.i]
	h.ProbeAt, h.ProbeGone = at, gone
}

// released records the last Unlock's return (call i).
func (oh *openHold) released(callIdx int) {
	c := oh.rec.call(callIdx)
	oh.rec.link(callIdx, oh.id)
	oh.rec.mu.Lock()
	defer oh.rec.mu.Unlock()
	h := &oh.rec.holds[oh.i]
	h.Done, h.DoneOut = c.End, c.Out
	h.LostInUnlock = syncx.Closed(oh.lost)
}

// snapshot copies what the recorder holds now.
func (rec *recorder) snapshot() ([]Call, []Hold) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	calls := make([]Call, len(rec.calls))
	copy(calls, rec.calls)
	for i := range calls {
		calls[i].Holds = append([]int(nil), calls[i].Holds...)
	}
	holds := make([]Hold, len(rec.holds))
	copy(holds, rec.holds)
	for i := range holds {
		h := &holds[i]
		h.LostLate = !h.End.IsZero() && h.Lost.IsZero() && !h.Skipped && syncx.Closed(rec.lost[i])
	}
	return calls, holds
}
