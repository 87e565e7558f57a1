package actors

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// base is what every lock actor shares: its place in the registry, its
// lifecycle (start, idle retirement, stop) and its timers' plumbing. The
// concrete actors embed it and implement state.
type base struct {
	rt    *Runtime
	key   Key
	entry *entry
	box   mailbox // its own, from started

	// now is the time the message being handled arrived: the one clock
	// reading of a pass (see receive).
	now time.Time

	idleTimer timer               // ticks every IdleAfter; see idleTick
	busy      bool                // a message other than an idle tick arrived since the last tick
	retiring  bool                // left the registry; forwards stragglers, then stops
	resend    func(msg any) error // delivers to this key's next actor; nil: rt.Send

	timer   timer     // the actor's one work timer (retries, backoffs)
	timerAt time.Time // when it fires; zero when stopped
}

// state is what base needs to know of a concrete actor.
type state interface {
	quiet() bool // nothing held, awaited or owed: the actor may retire
	tidy()       // drop what a quiet period makes unneeded (subscriptions, expired holds)
	shutdown()   // stop timers and subscriptions; the actor is stopping
}

// Shared, immutable messages: posting them allocates nothing.
var (
	idleTick  = &messages.IdleTick{}
	renewTick = &messages.RenewTick{}
	tick      = &messages.Tick{}
	cont      = &messages.Continue{}
	lockWake  = &messages.Wake{}
)

// lifecycle handles the messages every actor treats alike. It returns true
// when msg needs no further handling.
func (b *base) lifecycle(msg any, s state) bool {
	if msg != idleTick {
		b.busy = true
	}
	switch m := msg.(type) {
	case *started:
		b.box = m.box
		b.idleTimer = b.after(b.rt.cfg.IdleAfter, idleTick)
	case *messages.IdleTick:
		b.idleTick(s)
	case *stopping:
		if b.idleTimer != nil {
			b.idleTimer.Stop()
		}
		b.stopTimer()
		s.shutdown()
	case *stopped:
		b.rt.running.Done()
	case *messages.Acquire, *messages.Release, *messages.Adjust:
		return b.forward(m)
	default:
		return false
	}
	return true
}

// readClock reads the clock for the message about to be handled.
func (b *base) readClock() { b.now = b.rt.sched.Now() }

// after posts msg to this actor once d has passed.
func (b *base) after(d time.Duration, msg any) timer {
	box := b.box
	return b.rt.sched.AfterFunc(max(d, time.Millisecond), func() { box.post(msg) })
}

// post delivers msg to this actor, from any goroutine: how redisio's
// replies come back.
func (b *base) post(msg any) { b.box.post(msg) }

// wakeAt arms the work timer to post a Tick at t (zero: disarm). An earlier
// or equal arming is kept.
func (b *base) wakeAt(t time.Time) {
	if t.IsZero() {
		b.stopTimer()
		return
	}
	if !b.timerAt.IsZero() && !t.Before(b.timerAt) && b.timerAt.After(b.now) {
		return
	}
	b.timerAt = t
	d := max(t.Sub(b.now), time.Millisecond)
	if b.timer == nil {
		b.timer = b.after(d, tick)
		return
	}
	b.timer.Reset(d)
}

func (b *base) stopTimer() {
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timerAt = time.Time{}
}

// tickArrived notes that the work timer fired.
func (b *base) tickArrived() { b.timerAt = time.Time{} }

// steps runs step until it reports that nothing is due, one script per
// call; after reconcileBudget of them it lets the mailbox in and posts a
// Continue to resume.
func (b *base) steps(step func(now time.Time) bool) {
	for budget := reconcileBudget; step(b.now); budget-- {
		if budget == 1 {
			b.post(cont)
			return
		}
	}
}

// reconcileBudget bounds the scripts one pass runs before it lets the
// mailbox in (a Continue message resumes it).
const reconcileBudget = 32

// soonest collects the earliest of several times; zero times are ignored.
type soonest struct{ at time.Time }

func (s *soonest) add(t time.Time) {
	if !t.IsZero() && (s.at.IsZero() || t.Before(s.at)) {
		s.at = t
	}
}

// popPending removes and returns the oldest request of q still waiting for
// an answer, dropping answered or withdrawn ones on the way; nil if none.
func popPending(q *[]*messages.Acquire) *messages.Acquire {
	return popFree(q, func(string) bool { return false })
}

// popFree removes and returns the oldest request of q still waiting for an
// answer whose owner is not held back (an owner with a release owed to
// Redis waits for it; see owedQueue.owes), dropping answered or withdrawn
// requests on the way; nil if none. Held-back requests keep their order.
func popFree(q *[]*messages.Acquire, heldBack func(owner string) bool) *messages.Acquire {
	kept := (*q)[:0]
	var got *messages.Acquire
	for _, m := range *q {
		switch {
		case !m.Req.Pending():
		case got == nil && !heldBack(m.Owner):
			got = m
		default:
			kept = append(kept, m)
		}
	}
	clear((*q)[len(kept):])
	*q = kept
	return got
}

// forward re-sends a caller's message that reached this actor after it left
// the registry, so that a fresh actor serves it.
func (b *base) forward(m any) bool {
	if !b.retiring {
		return false
	}
	resend := b.resend
	if resend == nil {
		resend = func(msg any) error { return b.rt.Send(b.key, msg) }
	}
	if err := resend(m); err != nil {
		b.rt.cfg.Logger.Debug("lockactor: message dropped at close", "lock", b.key.Name)
	}
	return true
}

// idleTick runs every IdleAfter. After a quiet period it retires the actor
// when nothing is held, awaited or owed, and otherwise tidies up.
func (b *base) idleTick(s state) {
	if b.retiring {
		return
	}
	if b.busy {
		b.busy = false
		b.idleTimer.Reset(b.rt.cfg.IdleAfter)
		return
	}
	s.tidy()
	if s.quiet() && b.entry.retire() {
		b.rt.forget(b.key, b.entry)
		b.retiring = true
		b.stopTimer()
		s.shutdown()
		b.box.poison()
		return
	}
	b.idleTimer.Reset(b.rt.cfg.IdleAfter)
}

// signal is what a subscription's handler leaves for its actor between
// Wakes. Events coalesce: however many arrive while a Wake waits in the
// mailbox, the actor gets one Wake and reads the sum here.
type signal struct {
	queued  atomic.Bool            // a Wake is in the mailbox
	msgs    atomic.Int64           // messages since the actor last looked
	resync  atomic.Bool            // (re)subscribed or disconnected since: messages may be lost
	down    atomic.Bool            // Disconnected, and not Subscribed since: messages are being lost
	payload atomic.Pointer[string] // the latest message
	// seq numbers every message ever heard; marked is the number of the
	// latest whose payload was marker (set before subscribing, or ""). A
	// barrier reads seq as it passes (see countDownActor).
	seq, marked atomic.Int64
	marker      string
	// note is what the last note on the channel's ListenerMark said, until
	// the next message (a lockactor Client's release) takes it; noted is
	// the latest message's note, nil if it came without one (see
	// foreignWaiters.note).
	note, noted atomic.Pointer[string]
}

// news is what a Wake brings, read once by the actor.
type news struct {
	msgs    int64
	resync  bool
	down    bool // the subscription is down now (see signal.down)
	payload string
	marked  int64  // see signal.marked
	noted   bool   // the latest message came with a note (see signal.noted)
	note    string // what it said
}

// take reads and resets the signal. A handler event after this posts a new
// Wake, so nothing that arrives now goes unseen.
func (s *signal) take() news {
	s.queued.Store(false)
	n := news{msgs: s.msgs.Swap(0), resync: s.resync.Swap(false), down: s.down.Load(), marked: s.marked.Load()}
	if p := s.payload.Load(); p != nil {
		n.payload = *p
	}
	if p := s.noted.Load(); p != nil {
		n.noted, n.note = true, *p
	}
	return n
}

// subscribe adds a handler for channel that records every event in sig and
// posts wake unless one is already queued. The Subscribed event that
// confirms it triggers the fresh attempt that covers a message published
// before the subscription existed.
func (b *base) subscribe(channel string, sig *signal, wake *messages.Wake) uint64 {
	box := b.box
	handler := func(ev redisio.Event) {
		if ev.Kind == redisio.Message {
			sig.noted.Store(sig.note.Swap(nil))
			sig.payload.Store(&ev.Payload)
			sig.msgs.Add(1)
			if n := sig.seq.Add(1); sig.marker != "" && ev.Payload == sig.marker {
				sig.marked.Store(n)
			}
		} else {
			sig.down.Store(ev.Kind == redisio.Disconnected)
			sig.resync.Store(true)
			sig.note.Store(nil)
		}
		if sig.queued.CompareAndSwap(false, true) {
			box.post(wake)
		}
	}
	id, err := b.rt.ps.Subscribe(b.rt.ctx, channel, handler)
	if err != nil {
		b.rt.cfg.Logger.Debug("lockactor: subscribe failed; relying on timers", "lock", b.key.Name, "err", err)
	}
	return id
}

func (b *base) unsubscribe(channel string, id uint64) {
	if id != 0 && b.rt.ctx.Err() == nil {
		_ = b.rt.ps.Unsubscribe(b.rt.ctx, channel, id)
	}
}

// recoverPanic keeps a bug in one handler from killing the actor (a restart
// would lose its waiters): the caller of the message gets an error instead.
// Answers are once-only, so a message already answered is left alone.
func (b *base) recoverPanic(msg any) {
	r := recover()
	if r == nil {
		return
	}
	b.rt.cfg.Logger.Error("lockactor: lock actor panicked", "lock", b.key.Name, "panic", r, "stack", string(debug.Stack()))
	err := fmt.Errorf("internal error: %v", r)
	switch m := msg.(type) {
	case *messages.Acquire:
		m.Req.Answer(messages.Result{Err: err})
	case *messages.Release:
		m.Answer(messages.ReleaseResult{Err: err})
	case *messages.Adjust:
		answerAdjust(m, messages.AdjustResult{Err: err})
	case *messages.Extend:
		m.Answer(messages.ExtendResult{Err: err})
	}
}

func answerAdjust(m *messages.Adjust, res messages.AdjustResult) {
	if m.Reply != nil {
		select {
		case m.Reply <- res:
		default:
		}
	}
}

// refuseAdjusts answers err to the adjustments in *q, none of them sent
// (nothing changed), and empties the queue: what a stalled ledger tells
// the callers it cannot serve until Redis answers again.
func refuseAdjusts(q *[]*messages.Adjust, err error) {
	for _, m := range *q {
		answerAdjust(m, messages.AdjustResult{Err: err})
	}
	*q = nil
}
