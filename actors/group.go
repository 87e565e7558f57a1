package actors

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor/messages"
)

// Member is one lock of a group: the runtime whose actor serves it and the
// owner that holds it.
type Member struct {
	RT    *Runtime
	Key   Key
	Owner string
	Mode  messages.Mode
}

// Group configures a coordinator: a MultiLock (Quorum = every member) or a
// RedLock (Quorum = a majority, Redlock set).
type Group struct {
	Members     []Member
	Quorum      int
	Redlock     bool          // validity, clock drift and coordinator-run renewal
	Lease       time.Duration // RedLock lease without WithLease (renewed every Lease/3)
	NodeTimeout time.Duration // how long one round waits for a member's answer
	// ValidUntil is where a RedLock publishes the end of its guaranteed hold,
	// in nanoseconds since epoch; the handle reads it without a message.
	ValidUntil *atomic.Int64
}

// Retry spacing between rounds that failed on contention: random, so that
// competing groups do not retry in lockstep.
const (
	groupRetryMin = 5 * time.Millisecond
	groupRetryMax = 50 * time.Millisecond
)

// groupActor is the coordinator of one MultiLock or RedLock handle. It sends
// each round to the member locks' own actors in parallel (they may live in
// other Clients' runtimes) and takes their answers as messages, for at most
// NodeTimeout, then decides; members that did not answer in time are
// abandoned, and their actors give a late grant back by themselves. It never
// waits inside Receive: one round is out at a time (group_round.go), and
// what arrives meanwhile waits in later.
//
// Its states: idle, acquiring (a round out, or an acquisition between
// rounds), held, retiring. Its invariant: an acquisition is either in a
// round or has its retry timer armed (round and acquired are the only code
// that answers or re-arms it); a hold ends by Unlock, by a lost majority
// (RedLock renewal), or at heldUntil when it was taken with a fixed lease —
// and the coordinator retires only when no round is out, nothing is pending
// and no hold is left that has not ended.
type groupActor struct {
	base
	g Group

	pending  *messages.Acquire // an acquisition in a round or between rounds
	deadline time.Time         // its wait bound; zero: none
	retry    timer

	cur    *round // the round out, if any
	rounds uint64 // numbers rounds, so late answers are recognised
	later  []any  // caller messages and ticks that arrived while a round was out

	held      []bool        // members granted in the current hold
	heldUntil time.Time     // a fixed-lease hold's end; zero: until Unlock
	lease     time.Duration // the current RedLock hold's lease; 0 when not renewing
	renew     timer

	// The current hold's Lost channel (lostHold.go): closed when a
	// MultiLock's member is lost, or a RedLock keeps fewer than a majority
	// or its validity is spent. holdRound is the round that took the hold,
	// whose members' losses count.
	lost      chan struct{}
	lostShut  bool
	holdRound uint64
	expire    timer // a RedLock's validity end
}

func newGroupActor(rt *Runtime, key Key, e *entry, g Group) *groupActor {
	a := &groupActor{base: base{rt: rt, key: key, entry: e}, g: g}
	a.resend = func(msg any) error { return rt.SendGroup(key, g, msg) }
	return a
}

// receive is the coordinator's message loop.
func (a *groupActor) receive(msg any) {
	defer a.recoverPanic(msg)
	a.readClock()
	if a.lifecycle(msg, a) {
		return
	}
	a.handle(msg)
}

// handle applies one message; a caller's message or a tick that arrives
// while a round is out waits for the round to end.
func (a *groupActor) handle(msg any) {
	switch m := msg.(type) {
	case *memberAnswered:
		a.answered(m)
	case *roundTimeout:
		a.timedOut(m)
	case *messages.Acquire:
		a.acquire(m)
	case *messages.Release, *messages.RetryTick, *messages.RenewTick:
		if a.cur != nil {
			a.later = append(a.later, m)
			return
		}
		a.act(m)
	case *memberLost:
		a.memberLost(m)
	case *validityEnded:
		a.validityEnded(m)
	}
}

// act runs a caller's Release or a timer's tick, with no round out.
func (a *groupActor) act(msg any) {
	switch m := msg.(type) {
	case *messages.Release:
		a.release(m)
	case *messages.RetryTick:
		if a.pending != nil {
			a.round(a.pending)
		}
	case *messages.RenewTick:
		a.renewRound()
	}
}

func (a *groupActor) acquire(m *messages.Acquire) {
	if !m.Req.Pending() {
		return
	}
	if a.pending != nil && a.pending.Req.Pending() {
		// One acquisition at a time per handle; a second caller sharing the
		// handle waits for the first to finish.
		m.Req.Answer(messages.Result{Err: errors.New("another acquisition of this group is in progress")})
		return
	}
	if a.cur != nil {
		a.later = append(a.later, m) // a round for an earlier caller, or a release
		return
	}
	a.deadline = time.Time{}
	if m.Wait > 0 {
		a.deadline = a.now.Add(m.Wait)
	}
	a.round(m)
}

// round starts one attempt on every member for m; acquired decides it.
func (a *groupActor) round(m *messages.Acquire) {
	a.pending = m
	if !m.Req.Pending() {
		a.pending = nil
		return
	}
	lease := m.Lease
	if a.g.Redlock && lease == 0 {
		lease = a.g.Lease
	}
	r := a.begin(acquiring)
	r.m, r.lease = m, lease
	n := len(a.g.Members)
	r.reqs, r.parts = make([]*messages.Request, n), make([]messages.Result, n)
	for i, mem := range a.g.Members {
		reply := a.hook(r, i)
		r.reqs[i] = messages.NewRequestThen(func(res messages.Result) { reply(memberAnswered{acquired: res}) })
		msg := &messages.Acquire{Owner: mem.Owner, Mode: mem.Mode, Lease: lease, TryOnly: true, Req: r.reqs[i],
			OnLost: a.onMemberLost(r.id, i)}
		a.ask(r, i, msg, func(err error) { r.reqs[i].Answer(messages.Result{Err: err}) })
	}
}

// acquired decides an acquiring round: members still out are abandoned
// (an answer that beat the abandon is counted), and the caller gets the
// hold, a refusal, an error, or another round later.
func (a *groupActor) acquired(r *round, timedOut bool) {
	m, lease := r.m, r.lease
	granted := 0
	var errs []error
	for i := range r.reqs {
		switch {
		case r.answered[i]:
		case r.reqs[i].Abandon():
			if timedOut { // otherwise the round was decided without it
				r.parts[i].Err = errNoAnswer
			}
		default: // answered as we stopped looking
			<-r.reqs[i].Done()
			r.parts[i] = r.reqs[i].Result()
		}
		if r.parts[i].Granted {
			granted++
		}
		if r.parts[i].Err != nil {
			r.parts[i].Err = memberError(a.g.Members[i], r.parts[i].Err)
			errs = append(errs, r.parts[i].Err)
		}
	}
	// Every member's lease began no earlier than the round's start: once a
	// round outlasts its lease, the first members granted may be gone in
	// Redis already. A RedLock always has a lease; a MultiLock has one when
	// it was asked for (without one, each member's watchdog renews it).
	ok := granted >= a.g.Quorum
	if lease > 0 {
		ok = ok && validity(lease, a.now.Sub(r.start)) > 0
	}
	if ok {
		a.pending = nil
		a.hold(m, r.parts, r.start, lease)
		return
	}
	// Errors decide the answer only when they alone ruled the quorum out;
	// refusals by other holders mean "not acquired", and another round.
	impossible := len(a.g.Members)-len(errs) < a.g.Quorum
	// Members that did not answer within the node timeout may answer the
	// next round (a loaded machine, a first connection): while the wait
	// lasts, only errors that rule the quorum out without them end it.
	slow := 0
	for _, err := range errs {
		if errors.Is(err, errNoAnswer) {
			slow++
		}
	}
	lasting := len(a.g.Members)-(len(errs)-slow) < a.g.Quorum
	a.giveBack(r.parts, func() {
		more := !m.TryOnly && (a.deadline.IsZero() || a.now.Before(a.deadline))
		switch {
		case !m.Req.Pending():
			a.pending = nil
		case impossible && (lasting || !more):
			a.pending = nil
			m.Req.Answer(messages.Result{Err: errors.Join(errs...)})
		case !more:
			a.pending = nil
			m.Req.Answer(messages.Result{})
		default:
			a.armRetry()
		}
	})
}

// armRetry schedules the pending acquisition's next round: after a random
// pause, so that competing groups do not retry in lockstep, and no later
// than its wait bound.
func (a *groupActor) armRetry() {
	delay := groupRetryMin + rand.N(groupRetryMax-groupRetryMin)
	if !a.deadline.IsZero() {
		delay = min(delay, a.deadline.Sub(a.now))
	}
	if a.retry == nil {
		a.retry = a.after(delay, &messages.RetryTick{})
	} else {
		a.retry.Reset(max(delay, time.Millisecond))
	}
}

var errNoAnswer = errors.New("no answer within the node timeout")

// hold answers m with a grant, or gives everything back if m gave up.
func (a *groupActor) hold(m *messages.Acquire, parts []messages.Result, start time.Time, lease time.Duration) {
	if a.g.Redlock {
		// Before the answer: the caller may ask Validity as soon as
		// TryLock returns.
		a.publishValidity(start, lease)
	}
	lost := a.newLost(m)
	if !m.Req.Answer(messages.Result{Granted: true, Parts: parts, Lost: lost}) {
		a.publishValidity(time.Time{}, 0)
		a.dropLost(m)
		a.giveBack(parts, func() {})
		return
	}
	a.holdRound = a.rounds
	a.held = make([]bool, len(parts))
	for i, p := range parts {
		a.held[i] = p.Granted
	}
	a.heldUntil = time.Time{}
	if m.Lease > 0 {
		a.heldUntil = start.Add(m.Lease)
	}
	if !a.g.Redlock {
		return
	}
	a.expireAt(validUntil(start, lease))
	a.lease = 0
	if m.Lease == 0 {
		a.lease = lease
		a.armRenew()
	}
}

// giveBack releases every member granted in parts, then runs then: once
// every release is confirmed or a node timeout has passed, so that a
// refused caller does not hear its answer while its partial hold still
// turns others away.
func (a *groupActor) giveBack(parts []messages.Result, then func()) {
	r := a.begin(givingBack)
	r.then, r.results = then, make([]messages.ReleaseResult, len(parts))
	for i, p := range parts {
		if p.Granted {
			a.askRelease(r, i)
		}
	}
	if r.waiting == 0 {
		a.decide(r, false)
	}
}

// askRelease sends member i a Release whose answer comes back to round r.
func (a *groupActor) askRelease(r *round, i int) {
	mem, reply := a.g.Members[i], a.hook(r, i)
	msg := &messages.Release{Owner: mem.Owner, Mode: mem.Mode, Then: func(res messages.ReleaseResult) { reply(memberAnswered{released: res}) }}
	a.ask(r, i, msg, func(err error) { msg.Answer(messages.ReleaseResult{Err: err}) })
}

func memberError(mem Member, err error) error {
	return &MemberError{Name: mem.Key.Name, Err: err}
}

// MemberError is one member's failure within a group operation, as the
// coordinator reports it (alone, or joined with others by errors.Join).
// The root package hands callers its own lockactor.MemberError instead:
// see memberErrors in errors.go there.
type MemberError struct {
	Name string // the member lock's name
	Err  error  // what went wrong at that member
}

// Error names the member and says what went wrong.
func (e *MemberError) Error() string { return "member " + quoteName(e.Name) + ": " + e.Err.Error() }

// Unwrap gives the member's own error to errors.Is and errors.As.
func (e *MemberError) Unwrap() error { return e.Err }

func quoteName(name string) string {
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	return `"` + name + `"`
}
