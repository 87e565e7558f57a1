package actors

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// hold is what the actor knows of one local owner's holds. Redis is the truth;
// this mirror only decides whether to renew and which Lost channel to close.
type hold struct {
	count     int
	lease     time.Duration // 0: renewed by the watchdog
	confirmed time.Time     // when the last command that set the lease was sent
	lost      chan struct{} // closed when the hold is found gone
	loseOnce  sync.Once
	// deadline closes lost when a watchdog hold's lease would run out with no
	// renewal confirmed, even while the actor is stuck on a hung server.
	deadline *time.Timer
}

// expired reports whether a fixed lease has run out by the local clock.
func (h *hold) expired(now time.Time) bool {
	return h.lease > 0 && now.Sub(h.confirmed) >= h.lease
}

// lose closes the Lost channel once; the deadline timer may race the actor.
func (h *hold) lose() { h.loseOnce.Do(func() { close(h.lost) }) }

// isLost reports whether the Lost channel is closed.
func (h *hold) isLost() bool {
	select {
	case <-h.lost:
		return true
	default:
		return false
	}
}

// confirm records that Redis applied the lease of a command sent at sent, and
// moves the deadline of a watchdog hold to when that lease runs out.
func (h *hold) confirm(sent time.Time, watchdog time.Duration) {
	h.confirmed = sent
	if h.lease > 0 {
		h.stopDeadline()
		return
	}
	left := watchdog - time.Since(sent)
	if h.deadline == nil {
		h.deadline = time.AfterFunc(left, h.lose)
	} else {
		h.deadline.Reset(left)
	}
}

func (h *hold) stopDeadline() {
	if h.deadline != nil {
		h.deadline.Stop()
	}
}

// lockActor serves one reentrant lock name for one Client. Its states follow
// from its fields: idle (no holds, no waiters: it retires after IdleAfter),
// held (holds, renewed while watchdog holds exist), waiting (queued waiters,
// subscribed, retry timer armed for the holder's TTL), retiring (left the
// registry; forwards stragglers and stops).
type lockActor struct {
	rt    *Runtime
	key   Key
	entry *entry
	self  *actor.PID

	holds      map[string]*hold // local owner -> its holds
	waiters    waitQueue
	subID      uint64      // pub/sub handler id; 0 when not subscribed
	retry      *time.Timer // wakes the head waiter when the holder's TTL runs out
	renew      *time.Timer // the watchdog
	renewArmed bool
	idleTimer  *time.Timer // ticks every IdleAfter; see idle
	busy       bool        // a message other than an idle tick arrived since the last tick
	retiring   bool
}

func newLockActor(rt *Runtime, key Key, e *entry) *lockActor {
	return &lockActor{rt: rt, key: key, entry: e, holds: make(map[string]*hold)}
}

// Shared, immutable wake messages: posting them allocates nothing.
var (
	wakeTimer = &messages.Wake{Reason: messages.WakeTimer}
	wakeOn    = map[redisio.EventKind]*messages.Wake{
		redisio.Message:      {Reason: messages.WakeMessage},
		redisio.Subscribed:   {Reason: messages.WakeSubscribed},
		redisio.Disconnected: {Reason: messages.WakeDisconnected},
	}
	renewTick = &messages.RenewTick{}
	idleTick  = &messages.IdleTick{}
)

// Receive is the actor's message loop: one short handler per message.
func (a *lockActor) Receive(ctx actor.Context) {
	defer a.recoverPanic(ctx)
	msg := ctx.Message()
	if msg != idleTick {
		a.busy = true
	}
	switch m := msg.(type) {
	case *actor.Started:
		a.self = ctx.Self()
		// protoactor's SetReceiveTimeout races its own timer goroutine (seen
		// under -race), so idleness is measured with a plain ticking timer.
		pid, root := a.self, a.rt.system.Root
		a.idleTimer = time.AfterFunc(a.rt.cfg.IdleAfter, func() { root.Send(pid, idleTick) })
	case *messages.Acquire:
		if !a.forward(m) {
			a.acquire(m)
		}
	case *messages.Release:
		if !a.forward(m) {
			a.release(m)
		}
	case *messages.Abandon:
		a.waiters.front() // drops withdrawn heads
	case *messages.Wake:
		a.wake(m.Reason)
	case *messages.RenewTick:
		a.renewHolds()
	case *messages.IdleTick:
		a.idle(ctx)
	case *actor.Stopping:
		a.stopTimers()
		if a.rt.ctx.Err() == nil {
			a.unsubscribe()
		}
	case *actor.Stopped:
		a.rt.running.Done()
	}
}

// forward re-sends a caller's message that reached this actor after it left
// the registry, so that a fresh actor serves it.
func (a *lockActor) forward(m any) bool {
	if !a.retiring {
		return false
	}
	if err := a.rt.Send(a.key, m); err != nil {
		a.rt.cfg.Logger.Debug("lockactor: message dropped at close", "lock", a.key.Name)
	}
	return true
}

// acquire serves a caller's Acquire: reentry and first-comers try at once,
// everyone else queues behind the local waiters.
func (a *lockActor) acquire(m *messages.Acquire) {
	if m.Req.Abandoned() {
		return
	}
	_, reentry := a.holds[m.Owner]
	if !m.TryOnly && !reentry && !a.waiters.empty() {
		a.waiters.push(m)
		return
	}
	ok, ttl, err := a.try(m)
	switch {
	case err != nil:
		m.Req.Answer(messages.Result{Err: err})
	case ok:
	case m.TryOnly:
		m.Req.Answer(messages.Result{TTL: ttl})
	default:
		a.waiters.push(m)
		a.subscribe()
		a.armRetry(ttl)
	}
}

// wake makes one attempt for the head waiter. At most one attempt per name is
// in flight (the mailbox runs one message at a time), so an unlock costs one
// script however many local waiters there are.
func (a *lockActor) wake(reason messages.WakeReason) {
	head := a.waiters.front()
	if head == nil {
		return
	}
	if reason == messages.WakeMessage && a.heldLocally() {
		return // our own release's message: the release already handed over
	}
	ok, ttl, err := a.try(head)
	switch {
	case err != nil:
		// The attempt made on the queue's behalf failed: every waiter gets
		// the error rather than sleeping on a Redis that does not answer.
		a.waiters.drain(func(m *messages.Acquire) { m.Req.Answer(messages.Result{Err: err}) })
	case ok:
		a.waiters.pop()
	default:
		a.armRetry(ttl)
	}
}

// try runs the acquire script once for m; on a grant it records the hold and
// answers m.
func (a *lockActor) try(m *messages.Acquire) (ok bool, ttl time.Duration, err error) {
	sent := time.Now()
	ok, ttl, err = a.rt.io.Lock(a.rt.ctx, a.key.Name, m.Owner, a.leaseOf(m.Lease))
	if ok {
		a.grant(m, sent)
	}
	return ok, ttl, err
}

// grant records a hold taken at sent and tells the caller; if the caller has
// already given up, the hold goes straight back.
func (a *lockActor) grant(m *messages.Acquire, sent time.Time) {
	h := a.holds[m.Owner]
	if h == nil || h.expired(sent) {
		h = &hold{lost: make(chan struct{})}
		a.holds[m.Owner] = h
	}
	h.count++
	h.lease = m.Lease
	h.confirm(sent, a.rt.cfg.Watchdog)
	if !m.Req.Answer(messages.Result{Granted: true, Lost: h.lost}) {
		a.release(&messages.Release{Owner: m.Owner})
		return
	}
	if m.Lease == 0 {
		a.armRenew(a.rt.cfg.Watchdog / 3)
	}
}

// release gives back one hold of m.Owner; the last one wakes the next waiter.
func (a *lockActor) release(m *messages.Release) {
	h := a.holds[m.Owner]
	lease := a.rt.cfg.Watchdog
	if h != nil && h.lease > 0 {
		lease = h.lease
	}
	sent := time.Now()
	res, err := a.rt.io.Unlock(a.rt.ctx, a.key.Name, m.Owner, lease)
	if err != nil {
		answerRelease(m, messages.ReleaseResult{Err: err})
		return
	}
	switch res {
	case redisio.NotHeld:
		if h != nil {
			a.drop(m.Owner, h, true)
		}
		answerRelease(m, messages.ReleaseResult{NotHeld: true})
	case redisio.StillHeld:
		if h != nil {
			h.count = max(h.count-1, 1)
			h.confirm(sent, a.rt.cfg.Watchdog)
		}
		answerRelease(m, messages.ReleaseResult{})
	case redisio.Released:
		if h != nil {
			a.drop(m.Owner, h, false)
		}
		answerRelease(m, messages.ReleaseResult{})
		a.wake(messages.WakeReleased)
	}
}

func answerRelease(m *messages.Release, res messages.ReleaseResult) {
	if m.Reply != nil {
		m.Reply <- res
	}
}

// drop forgets an owner's holds, closing its Lost channel when they were lost
// rather than released.
func (a *lockActor) drop(owner string, h *hold, lost bool) {
	h.stopDeadline()
	if lost {
		h.lose()
		a.rt.cfg.Logger.Info("lockactor: lock lost", "lock", a.key.Name, "owner", owner)
	}
	delete(a.holds, owner)
	if !a.hasWatchdogHolds() && a.renew != nil {
		a.renew.Stop()
		a.renewArmed = false
	}
}

// heldLocally reports whether a local owner holds the lock by our records.
func (a *lockActor) heldLocally() bool {
	now := time.Now()
	for _, h := range a.holds {
		if !h.expired(now) && !h.isLost() {
			return true
		}
	}
	return false
}

func (a *lockActor) hasWatchdogHolds() bool {
	for _, h := range a.holds {
		if h.lease == 0 {
			return true
		}
	}
	return false
}

// leaseOf is the lease a hold is taken with: the caller's, or the watchdog's.
func (a *lockActor) leaseOf(lease time.Duration) time.Duration {
	if lease > 0 {
		return lease
	}
	return a.rt.cfg.Watchdog
}

// idle runs every IdleAfter. After a quiet period it retires the actor when
// nothing is held or awaited, and otherwise drops what is no longer needed
// (expired leases, an unused subscription).
func (a *lockActor) idle(ctx actor.Context) {
	if a.retiring {
		return
	}
	if a.busy {
		a.busy = false
		a.idleTimer.Reset(a.rt.cfg.IdleAfter)
		return
	}
	now := time.Now()
	for owner, h := range a.holds {
		if h.expired(now) {
			a.drop(owner, h, false)
		}
	}
	if a.waiters.empty() {
		a.unsubscribe()
		a.waiters = waitQueue{}
	}
	if len(a.holds) == 0 && a.waiters.empty() && a.entry.retire() {
		a.rt.forget(a.key, a.entry)
		a.retiring = true
		a.stopTimers()
		ctx.Poison(ctx.Self())
		return
	}
	a.idleTimer.Reset(a.rt.cfg.IdleAfter)
}

// recoverPanic keeps a bug in one handler from killing the actor (a restart
// would lose its waiters): the caller of the message gets an error instead.
func (a *lockActor) recoverPanic(ctx actor.Context) {
	r := recover()
	if r == nil {
		return
	}
	a.rt.cfg.Logger.Error("lockactor: lock actor panicked", "lock", a.key.Name, "panic", r, "stack", string(debug.Stack()))
	err := fmt.Errorf("internal error: %v", r)
	switch m := ctx.Message().(type) {
	case *messages.Acquire:
		m.Req.Answer(messages.Result{Err: err})
	case *messages.Release:
		answerRelease(m, messages.ReleaseResult{Err: err})
	}
}
