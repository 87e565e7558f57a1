package actors

import (
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// semaphoreActor serves one semaphore name for one Client: a FIFO of local
// acquirers, woken by the count published on redisson_sc:{name} and by a
// periodic re-check (a semaphore has no TTL to bound a lost message).
type semaphoreActor struct {
	base
	waiters waitQueue
	subID   uint64
	recheck *time.Timer
}

func newSemaphoreActor(rt *Runtime, key Key, e *entry) *semaphoreActor {
	return &semaphoreActor{base: base{rt: rt, key: key, entry: e}}
}

// Receive is the actor's message loop.
func (a *semaphoreActor) Receive(ctx actor.Context) {
	defer a.recoverPanic(ctx)
	if a.lifecycle(ctx, a) {
		return
	}
	switch m := ctx.Message().(type) {
	case *messages.Acquire:
		a.acquire(m)
	case *messages.Abandon:
		a.waiters.front()
	case *messages.Wake:
		head := a.waiters.front()
		if head == nil {
			return
		}
		// A message carries the count now available: too few for the head
		// means no attempt.
		if n, err := strconv.Atoi(m.Payload); m.Reason == messages.WakeMessage && err == nil && n < head.Permits {
			return
		}
		a.serve()
	}
}

func (a *semaphoreActor) acquire(m *messages.Acquire) {
	if !m.Req.Pending() {
		return
	}
	if !m.TryOnly && !a.waiters.empty() {
		a.waiters.push(m)
		return
	}
	ok, err := a.rt.io.SemaphoreAcquire(a.rt.ctx, a.key.Name, m.Permits)
	switch {
	case err != nil:
		m.Req.Answer(messages.Result{Err: err})
	case ok:
		a.answerGrant(m)
	case m.TryOnly:
		m.Req.Answer(messages.Result{})
	default:
		a.waiters.push(m)
		if a.subID == 0 {
			a.subID = a.subscribe(redisio.SemaphoreChannel(a.key.Name), "")
		}
		a.armRecheck()
	}
}

// serve grants waiters in order while permits last; one attempt at a time.
func (a *semaphoreActor) serve() {
	for head := a.waiters.front(); head != nil; head = a.waiters.front() {
		ok, err := a.rt.io.SemaphoreAcquire(a.rt.ctx, a.key.Name, head.Permits)
		switch {
		case err != nil:
			failAll(&a.waiters, err)
			return
		case !ok:
			a.armRecheck()
			return
		}
		a.waiters.pop()
		a.answerGrant(head)
	}
}

// answerGrant tells the caller; permits taken for a caller that has given up
// go straight back.
func (a *semaphoreActor) answerGrant(m *messages.Acquire) {
	if m.Req.Answer(messages.Result{Granted: true}) {
		return
	}
	if _, err := a.rt.io.SemaphoreAdd(a.rt.ctx, a.key.Name, m.Permits); err != nil {
		a.rt.cfg.Logger.Error("lockactor: could not return permits of a cancelled acquire", "semaphore", a.key.Name, "permits", m.Permits, "err", err)
	}
}

func (a *semaphoreActor) armRecheck() {
	if a.recheck == nil {
		a.recheck = a.after(a.rt.cfg.SemaphoreRecheck, wakeTimer)
		return
	}
	a.recheck.Reset(a.rt.cfg.SemaphoreRecheck)
}

func (a *semaphoreActor) quiet() bool { return a.waiters.empty() }

func (a *semaphoreActor) tidy() {
	if a.waiters.empty() {
		a.unsubscribe(redisio.SemaphoreChannel(a.key.Name), a.subID)
		a.subID = 0
		a.waiters = waitQueue{}
	}
}

func (a *semaphoreActor) shutdown() {
	if a.recheck != nil {
		a.recheck.Stop()
	}
	a.unsubscribe(redisio.SemaphoreChannel(a.key.Name), a.subID)
	a.subID = 0
}
