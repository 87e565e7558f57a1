package actors

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
	// in nanoseconds since Epoch; the handle reads it without a message.
	ValidUntil *atomic.Int64
}

// Epoch anchors ValidUntil on the monotonic clock.
var Epoch = time.Now()

// Retry spacing between rounds that failed on contention: random, so that
// competing groups do not retry in lockstep.
const (
	groupRetryMin = 5 * time.Millisecond
	groupRetryMax = 50 * time.Millisecond
)

// groupActor is the coordinator of one MultiLock or RedLock handle. It sends
// each round to the member locks' own actors in parallel (they may live in
// other Clients' runtimes), waits for their answers for at most NodeTimeout
// (or until Close), and decides; members that did not answer in time are
// abandoned, and their actors give a late grant back by themselves.
//
// Its states: idle, trying (an acquisition between rounds), held, retiring.
// Its invariant: an acquisition between rounds always has its retry timer
// armed (round is the only code that answers or re-arms it); a hold ends by
// Unlock, by a lost majority (RedLock renewal), or at heldUntil when it was
// taken with a fixed lease — and the coordinator retires only when nothing
// is pending and no hold is left that has not ended.
type groupActor struct {
	base
	g Group

	pending  *messages.Acquire // an acquisition between rounds
	deadline time.Time         // its wait bound; zero: none
	retry    *time.Timer

	held      []bool        // members granted in the current hold
	heldUntil time.Time     // a fixed-lease hold's end; zero: until Unlock
	lease     time.Duration // the current RedLock hold's lease; 0 when not renewing
	renew     *time.Timer
}

func newGroupActor(rt *Runtime, key Key, e *entry, g Group) *groupActor {
	a := &groupActor{base: base{rt: rt, key: key, entry: e}, g: g}
	a.resend = func(msg any) error { return rt.SendGroup(key, g, msg) }
	return a
}

// Receive is the coordinator's message loop.
func (a *groupActor) Receive(ctx actor.Context) {
	defer a.recoverPanic(ctx)
	if a.lifecycle(ctx, a) {
		return
	}
	switch m := ctx.Message().(type) {
	case *messages.Acquire:
		a.acquire(m)
	case *messages.RetryTick:
		if a.pending != nil {
			a.round(a.pending)
		}
	case *messages.Release:
		a.release(m)
	case *messages.RenewTick:
		a.renewRound()
	}
}

func (a *groupActor) acquire(m *messages.Acquire) {
	if !m.Req.Pending() {
		return
	}
	if a.pending != nil && !a.pending.Req.Pending() {
		a.pending = nil // its caller gave up between rounds
	}
	if a.pending != nil {
		// One acquisition at a time per handle; a second caller sharing the
		// handle waits for the first to finish.
		m.Req.Answer(messages.Result{Err: errors.New("another acquisition of this group is in progress")})
		return
	}
	a.deadline = time.Time{}
	if m.Wait > 0 {
		a.deadline = time.Now().Add(m.Wait)
	}
	a.round(m)
}

// round makes one attempt on every member and answers m, or schedules the
// next round.
func (a *groupActor) round(m *messages.Acquire) {
	a.pending = nil
	if !m.Req.Pending() {
		return
	}
	lease := m.Lease
	if a.g.Redlock && lease == 0 {
		lease = a.g.Lease
	}
	start := time.Now()
	parts, granted, errs := a.ask(m, lease)
	elapsed := time.Since(start)
	ok := granted >= a.g.Quorum
	var validity time.Duration
	if a.g.Redlock {
		validity = lease - elapsed - drift(lease)
		ok = ok && validity > 0
	}
	if ok {
		a.hold(m, parts, start, lease, validity)
		return
	}
	a.giveBack(parts)
	// Errors decide the answer only when they alone ruled the quorum out;
	// refusals by other holders mean "not acquired", and another round.
	impossible := len(a.g.Members)-len(errs) < a.g.Quorum
	more := !m.TryOnly && (a.deadline.IsZero() || time.Now().Before(a.deadline))
	switch {
	case impossible:
		m.Req.Answer(messages.Result{Err: errors.Join(errs...)})
	case !more:
		m.Req.Answer(messages.Result{})
	default:
		a.pending = m
		delay := groupRetryMin + rand.N(groupRetryMax-groupRetryMin)
		if !a.deadline.IsZero() {
			delay = min(delay, time.Until(a.deadline))
		}
		if a.retry == nil {
			a.retry = a.after(delay, &messages.RetryTick{})
		} else {
			a.retry.Reset(max(delay, time.Millisecond))
		}
	}
}

// drift is the Redlock clock-drift allowance: 1% of the lease plus 2 ms.
func drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// ask sends one acquire to every member in parallel (each member's actor runs
// its own script) and collects the answers that arrive within NodeTimeout.
// It stops early only when the quorum can no longer be reached. Members that
// did not answer are abandoned: their actors give a late grant back.
func (a *groupActor) ask(m *messages.Acquire, lease time.Duration) (parts []messages.Result, granted int, errs []error) {
	n := len(a.g.Members)
	reqs := make([]*messages.Request, n)
	parts = make([]messages.Result, n)
	answered := make([]bool, n)
	cases := make([]reflect.SelectCase, n+2)
	waiting := 0
	for i, mem := range a.g.Members {
		reqs[i] = messages.NewRequest()
		msg := &messages.Acquire{Owner: mem.Owner, Mode: mem.Mode, Lease: lease, TryOnly: true, Req: reqs[i]}
		if err := mem.RT.Send(mem.Key, msg); err != nil {
			parts[i].Err, answered[i] = err, true
			continue
		}
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(reqs[i].Reply())}
		waiting++
	}
	timer := time.NewTimer(a.g.NodeTimeout)
	defer timer.Stop()
	cases[n] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}
	cases[n+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(a.rt.done)} // Close
	count := func(i int) {
		if parts[i].Granted {
			granted++
		}
	}
	timedOut := false
	for ; waiting > 0 && granted+waiting >= a.g.Quorum; waiting-- {
		i, v, _ := reflect.Select(cases)
		if i >= n {
			timedOut = true
			break
		}
		parts[i], answered[i] = v.Interface().(messages.Result), true
		cases[i].Chan = reflect.Value{} // a zero channel is never chosen again
		count(i)
	}
	for i := range reqs {
		switch {
		case answered[i]:
		case reqs[i].Abandon():
			if timedOut { // otherwise the round was decided without it
				parts[i].Err = errNoAnswer
			}
		default: // answered as we stopped looking
			parts[i] = <-reqs[i].Reply()
			count(i)
		}
		if parts[i].Err != nil {
			parts[i].Err = memberError(a.g.Members[i], parts[i].Err)
			errs = append(errs, parts[i].Err)
		}
	}
	return parts, granted, errs
}

var errNoAnswer = errors.New("no answer within the node timeout")

// hold answers m with a grant, or gives everything back if m gave up.
func (a *groupActor) hold(m *messages.Acquire, parts []messages.Result, start time.Time, lease, validity time.Duration) {
	if a.g.Redlock {
		// Before the answer: the caller may ask Validity as soon as
		// TryLock returns.
		a.g.ValidUntil.Store(int64(start.Add(validity).Sub(Epoch)))
	}
	if !m.Req.Answer(messages.Result{Granted: true, Parts: parts}) {
		a.g.ValidUntil.Store(0)
		a.giveBack(parts)
		return
	}
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
	a.lease = 0
	if m.Lease == 0 {
		a.lease = lease
		a.armRenew()
	}
}

// giveBack releases every member granted in parts and waits (at most a node
// timeout) for the releases, so that a refused caller does not return while
// its partial hold still turns others away.
func (a *groupActor) giveBack(parts []messages.Result) {
	deadline := time.Now().Add(a.g.NodeTimeout)
	var replies []chan messages.ReleaseResult
	for i, p := range parts {
		if !p.Granted {
			continue
		}
		mem := a.g.Members[i]
		reply := make(chan messages.ReleaseResult, 1)
		if mem.RT.Send(mem.Key, &messages.Release{Owner: mem.Owner, Mode: mem.Mode, Reply: reply}) == nil {
			replies = append(replies, reply)
		}
	}
	for _, reply := range replies {
		receiveBy(reply, deadline, a.rt.done)
	}
}

func memberError(mem Member, err error) error {
	return &MemberError{Name: mem.Key.Name, Err: err}
}

// MemberError is one member's failure within a group operation.
type MemberError struct {
	Name string
	Err  error
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
