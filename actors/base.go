package actors

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
	self  *actor.PID

	idleTimer *time.Timer         // ticks every IdleAfter; see idleTick
	busy      bool                // a message other than an idle tick arrived since the last tick
	retiring  bool                // left the registry; forwards stragglers, then stops
	resend    func(msg any) error // delivers to this key's next actor; nil: rt.Send
}

// state is what base needs to know of a concrete actor.
type state interface {
	quiet() bool // nothing held and nobody waiting: the actor may retire
	tidy()       // drop what a quiet period makes unneeded (subscriptions, expired holds)
	shutdown()   // stop timers and subscriptions; the actor is stopping
}

// Shared, immutable messages: posting them allocates nothing.
var (
	idleTick  = &messages.IdleTick{}
	renewTick = &messages.RenewTick{}
	wakeTimer = &messages.Wake{Reason: messages.WakeTimer}
	wakeOn    = map[redisio.EventKind]*messages.Wake{
		redisio.Message:      {Reason: messages.WakeMessage},
		redisio.Subscribed:   {Reason: messages.WakeSubscribed},
		redisio.Disconnected: {Reason: messages.WakeDisconnected},
	}
)

// lifecycle handles the messages every actor treats alike. It returns true
// when msg needs no further handling.
func (b *base) lifecycle(ctx actor.Context, s state) bool {
	msg := ctx.Message()
	if msg != idleTick {
		b.busy = true
	}
	switch m := msg.(type) {
	case *actor.Started:
		b.self = ctx.Self()
		// protoactor's SetReceiveTimeout races its own timer goroutine (seen
		// under -race), so idleness is measured with a plain ticking timer.
		b.idleTimer = b.after(b.rt.cfg.IdleAfter, idleTick)
	case *messages.IdleTick:
		b.idleTick(ctx, s)
	case *actor.Stopping:
		if b.idleTimer != nil {
			b.idleTimer.Stop()
		}
		s.shutdown()
	case *actor.Stopped:
		b.rt.running.Done()
	case *messages.Acquire, *messages.Release:
		return b.forward(m)
	default:
		return false
	}
	return true
}

// after posts msg to this actor once d has passed.
func (b *base) after(d time.Duration, msg any) *time.Timer {
	pid, root := b.self, b.rt.system.Root
	return time.AfterFunc(max(d, time.Millisecond), func() { root.Send(pid, msg) })
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
// when nothing is held or awaited, and otherwise tidies up.
func (b *base) idleTick(ctx actor.Context, s state) {
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
		s.shutdown()
		ctx.Poison(ctx.Self())
		return
	}
	b.idleTimer.Reset(b.rt.cfg.IdleAfter)
}

// subscribe adds a handler for channel that turns every event into a Wake
// for owner ("" for the lock's own channel). The Subscribed event that
// confirms it triggers the fresh attempt that covers a message published
// before the subscription existed.
func (b *base) subscribe(channel, owner string) uint64 {
	pid, root := b.self, b.rt.system.Root
	handler := func(ev redisio.Event) {
		if owner == "" && ev.Kind != redisio.Message {
			root.Send(pid, wakeOn[ev.Kind])
			return
		}
		root.Send(pid, &messages.Wake{Reason: wakeOn[ev.Kind].Reason, Owner: owner, Payload: ev.Payload})
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
func (b *base) recoverPanic(ctx actor.Context) {
	r := recover()
	if r == nil {
		return
	}
	b.rt.cfg.Logger.Error("lockactor: lock actor panicked", "lock", b.key.Name, "panic", r, "stack", string(debug.Stack()))
	err := fmt.Errorf("internal error: %v", r)
	switch m := ctx.Message().(type) {
	case *messages.Acquire:
		m.Req.Answer(messages.Result{Err: err})
	case *messages.Release:
		answerRelease(m, messages.ReleaseResult{Err: err})
	}
}

func answerRelease(m *messages.Release, res messages.ReleaseResult) {
	if m.Reply != nil {
		m.Reply <- res
	}
}

// failAll answers every waiter in q with err.
func failAll(q *waitQueue, err error) {
	q.drain(func(m *messages.Acquire) { m.Req.Answer(messages.Result{Err: err}) })
}
