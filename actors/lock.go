package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// lockActor serves one owner-based lock name (Lock, FencedLock or
// ReadWriteLock) for one Client; its scheme holds what differs between them.
// Its states follow from its fields: idle (no holds, no waiters: it retires),
// held (holds, renewed while watchdog holds exist), waiting (queued waiters,
// subscribed, retry timer armed for the holder's TTL), retiring (left the
// registry; forwards stragglers and stops).
type lockActor struct {
	base
	holdBook
	scheme  scheme
	waiters waitQueue
	subID   uint64      // pub/sub handler id; 0 when not subscribed
	retry   *time.Timer // wakes the waiters when the holder's TTL runs out
	// handoffs counts releases handed straight to a local waiter in a row;
	// after handoffRun the next release frees the lock for everyone.
	handoffs int
	// echoes counts release messages we published and have yet to hear: a
	// message while a local owner holds is our own echo, or news (a force
	// unlock) when no echo is due.
	echoes int
}

// handoffRun bounds a run of local hand-offs: then the lock is released and
// published, and local waiters race the other processes' for it.
const handoffRun = 64

func newLockActor(rt *Runtime, key Key, e *entry, s scheme) *lockActor {
	return &lockActor{
		base:     base{rt: rt, key: key, entry: e},
		holdBook: newHoldBook(rt.cfg.Watchdog),
		scheme:   s,
	}
}

// Receive is the actor's message loop: one short handler per message.
func (a *lockActor) Receive(ctx actor.Context) {
	defer a.recoverPanic(ctx)
	if a.lifecycle(ctx, a) {
		return
	}
	switch m := ctx.Message().(type) {
	case *messages.Acquire:
		a.acquire(m)
	case *messages.Release:
		a.release(m)
	case *messages.Abandon:
		a.waiters.front() // drops withdrawn heads
	case *messages.Wake:
		own := a.echo(m.Reason)
		if a.scheme.exclusive() && a.held() && (own || m.Reason == messages.WakeSubscribed) {
			return // our own release's echo, or a (re)subscription while we hold
		}
		if a.serve() && m.Reason == messages.WakeMessage && a.scheme.exclusive() {
			// We won the race a release message started: go to the back of
			// the channel's subscribers so other processes go first next time.
			_ = a.rt.ps.Requeue(a.rt.ctx, a.scheme.channel(a.key.Name))
		}
	case *messages.RenewTick:
		if a.renewAll(&a.base, a.renewOne) {
			a.serve() // a lost hold frees the lock for local waiters
		}
	case *messages.Extend:
		a.extend(m, a.renewOne)
	case *messages.Lose:
		a.lose(m)
	}
}

// acquire serves a caller's Acquire: owners that already hold and first-comers
// try at once, everyone else queues behind the local waiters.
func (a *lockActor) acquire(m *messages.Acquire) {
	if !m.Req.Pending() {
		return
	}
	if !m.TryOnly && !a.owns(m.Owner) && !a.waiters.empty() {
		a.waiters.push(m)
		return
	}
	res, err := a.try(m)
	switch {
	case err != nil:
		m.Req.Answer(messages.Result{Err: err})
	case res.ok:
	case res.upgrade:
		m.Req.Answer(messages.Result{Upgrade: true})
	case m.TryOnly:
		m.Req.Answer(messages.Result{TTL: res.ttl})
	default:
		a.waiters.push(m)
		if a.subID == 0 {
			a.subID = a.subscribe(a.scheme.channel(a.key.Name), "")
		}
		a.armRetry(res.ttl)
	}
}

// owns reports whether owner holds any view of the lock; its requests never
// queue behind waiters that may be waiting for it.
func (a *lockActor) owns(owner string) bool {
	for _, mode := range [...]messages.Mode{messages.Exclusive, messages.Read, messages.Write} {
		if _, ok := a.holds[holdKey{owner, mode}]; ok {
			return true
		}
	}
	return false
}

// serve makes one attempt for the head waiter, and after a read grant one
// for every other waiting reader. At most one attempt per name is in flight
// (the mailbox runs one message at a time), so an unlock costs one script
// however many local waiters there are.
func (a *lockActor) serve() (granted bool) {
	for head := a.waiters.front(); head != nil; head = a.waiters.front() {
		res, err := a.try(head)
		switch {
		case err != nil:
			// The attempt made on the queue's behalf failed: every waiter
			// gets the error rather than sleeping on a Redis that does not
			// answer.
			failAll(&a.waiters, err)
			return false
		case res.upgrade:
			head.Req.Answer(messages.Result{Upgrade: true})
			a.waiters.pop()
			continue
		case !res.ok:
			a.armRetry(res.ttl)
			return false
		}
		a.waiters.pop()
		if head.Mode == messages.Read {
			a.serveReaders()
		}
		return true
	}
	return false
}

// serveReaders grants the lock to every waiting reader once one reader got
// it: readers share the lock.
func (a *lockActor) serveReaders() {
	stop := false
	a.waiters.each(func(m *messages.Acquire) {
		if stop || m.Mode != messages.Read {
			return
		}
		res, err := a.try(m)
		switch {
		case err != nil:
			m.Req.Answer(messages.Result{Err: err})
			stop = true
		case !res.ok:
			stop = true
		}
	})
}

// try runs the acquire script once for m; on a grant it records the hold and
// answers m.
func (a *lockActor) try(m *messages.Acquire) (attempt, error) {
	sent := time.Now()
	res, err := a.scheme.acquire(a, m, a.leaseOf(m.Lease))
	if err == nil && res.ok {
		a.grant(m, sent, res.token)
	}
	return res, err
}

// grant records a hold taken at sent and tells the caller; if the caller has
// already given up, the hold goes straight back.
func (a *lockActor) grant(m *messages.Acquire, sent time.Time, token uint64) {
	h := a.granted(holdKey{m.Owner, m.Mode}, sent, m.Lease, token)
	if !m.Req.Answer(messages.Result{Granted: true, Lost: h.lost, Token: h.token}) {
		a.release(&messages.Release{Owner: m.Owner, Mode: m.Mode})
		return
	}
	if m.Lease == 0 {
		a.arm(&a.base, a.watchdog/3)
	}
}

// release gives back one hold. When local waiters queue, the last hold is
// handed to the head in the same script (one round trip per acquisition);
// after handoffRun of those, the lock is released and published and the
// local waiters wait for the message like every other process's, so remote
// waiters get their turn.
func (a *lockActor) release(m *messages.Release) {
	k := holdKey{m.Owner, m.Mode}
	sent := time.Now()
	res, next, err := a.releaseOrHand(m, a.leaseFor(k))
	if err != nil {
		answerRelease(m, messages.ReleaseResult{Err: err})
		return
	}
	a.released(k, res)
	answerRelease(m, messages.ReleaseResult{
		NotHeld: res == redisio.NotHeld,
		Gone:    res == redisio.Released || res == redisio.Left || res == redisio.HandedOver,
	})
	switch res {
	case redisio.HandedOver:
		a.handoffs++
		a.waiters.pop()
		a.grant(next, sent, 0)
	case redisio.Released:
		if a.subID != 0 {
			a.echoes++
		}
		if a.handoffs >= handoffRun {
			a.handoffs = 0
			return // our own release message wakes the local waiters, fairly
		}
		a.handoffs = 0
		a.serve()
	}
}

// echo reports whether a wake is the echo of our own release. Any
// (re)subscription or disconnection may have lost messages: the count starts
// over.
func (a *lockActor) echo(reason messages.WakeReason) bool {
	switch reason {
	case messages.WakeMessage:
		if a.echoes > 0 {
			a.echoes--
			return true
		}
	case messages.WakeSubscribed, messages.WakeDisconnected:
		a.echoes = 0
	}
	return false
}

// releaseOrHand runs the hand-off script when the head waiter can take the
// lock over, else the scheme's release.
func (a *lockActor) releaseOrHand(m *messages.Release, lease time.Duration) (redisio.UnlockResult, *messages.Acquire, error) {
	head := a.waiters.front()
	if head != nil && a.handoffs < handoffRun && head.Owner != m.Owner &&
		head.Mode == messages.Exclusive && m.Mode == messages.Exclusive {
		res, ok, err := a.scheme.handoff(a, m, lease, head, a.leaseOf(head.Lease))
		if ok {
			return res, head, err
		}
	}
	res, err := a.scheme.release(a, m, lease)
	return res, nil, err
}

func (a *lockActor) renewOne(k holdKey, lease time.Duration) (bool, error) {
	return a.scheme.renew(a, k, lease)
}

// armRetry wakes the waiters when the holder's TTL runs out, in case the
// unlock message is lost. A key without expiry (ttl < 0) is retried after a
// watchdog period.
func (a *lockActor) armRetry(ttl time.Duration) {
	if ttl < 0 {
		ttl = a.watchdog
	}
	if a.retry == nil {
		a.retry = a.after(ttl, wakeTimer)
		return
	}
	a.retry.Reset(max(ttl, time.Millisecond))
}

func (a *lockActor) quiet() bool { return len(a.holds) == 0 && a.waiters.empty() }

func (a *lockActor) tidy() {
	a.holdBook.tidy()
	if a.waiters.empty() {
		a.unsubscribe(a.scheme.channel(a.key.Name), a.subID)
		a.subID = 0
		a.waiters = waitQueue{}
	}
}

func (a *lockActor) shutdown() {
	a.holdBook.stop()
	if a.retry != nil {
		a.retry.Stop()
	}
	a.unsubscribe(a.scheme.channel(a.key.Name), a.subID)
	a.subID = 0
}
