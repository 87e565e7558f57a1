package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// fairActor serves one fair lock name for one Client. Order is kept in Redis
// (a queue of owners across all clients), so unlike lockActor every local
// waiter joins that queue with its own script, listens on its own channel and
// has its own retry timer; a release wakes only the queue's head.
type fairActor struct {
	base
	holdBook
	waiting map[string]*fairWaiter // by owner
}

// fairWaiter is one owner queued in Redis, with the local calls that wait on
// it (several when goroutines share a handle).
type fairWaiter struct {
	owner   string
	reqs    []*messages.Acquire
	w       time.Duration // how long Redis keeps it queued without a retry
	subID   uint64
	retry   *time.Timer
	backoff time.Duration // grows while the script keeps answering "now"
}

// Retry spacing while the script estimates no wait but the turn has not come
// (a message is due); it never busy-polls.
const (
	fairMinBackoff = 20 * time.Millisecond
	fairMaxBackoff = time.Second
)

func newFairActor(rt *Runtime, key Key, e *entry) *fairActor {
	return &fairActor{
		base:     base{rt: rt, key: key, entry: e},
		holdBook: newHoldBook(rt.cfg.Watchdog),
		waiting:  make(map[string]*fairWaiter),
	}
}

// Receive is the actor's message loop.
func (a *fairActor) Receive(ctx actor.Context) {
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
		if w := a.waiting[m.Owner]; w != nil {
			a.abandoned(w)
		}
	case *messages.Wake:
		if w := a.waiting[m.Owner]; w != nil {
			a.serve(w)
		}
	case *messages.RenewTick:
		a.renewAll(&a.base, a.renewOne)
	case *messages.Extend:
		a.extend(m, a.renewOne)
	case *messages.Lose:
		a.lose(m)
	}
}

func (a *fairActor) acquire(m *messages.Acquire) {
	if !m.Req.Pending() {
		return
	}
	if w := a.waiting[m.Owner]; w != nil && !m.TryOnly {
		w.reqs = append(w.reqs, m) // same handle from two goroutines: one queue entry
		return
	}
	w := &fairWaiter{owner: m.Owner, reqs: []*messages.Acquire{m}, w: a.rt.cfg.FairWait}
	if m.Wait > 0 {
		w.w = m.Wait
	}
	ok, wait, err := a.try(w, m)
	switch {
	case err != nil:
		m.Req.Answer(messages.Result{Err: err})
	case ok:
	case m.TryOnly:
		m.Req.Answer(messages.Result{TTL: wait})
	default:
		a.waiting[m.Owner] = w
		w.subID = a.subscribe(redisio.FairChannel(a.key.Name, w.owner), w.owner)
		a.armRetry(w, wait)
	}
}

// serve retries for one queued owner; on a grant every call waiting on it is
// answered (the later ones as reentrant holds).
func (a *fairActor) serve(w *fairWaiter) {
	for len(w.reqs) > 0 {
		m := w.reqs[0]
		if !m.Req.Pending() {
			w.reqs = w.reqs[1:]
			continue
		}
		ok, wait, err := a.try(w, m)
		switch {
		case err != nil:
			for _, r := range w.reqs {
				r.Req.Answer(messages.Result{Err: err})
			}
			w.reqs = nil
		case ok:
			w.reqs = w.reqs[1:]
		default:
			a.armRetry(w, wait)
			return
		}
	}
	a.forgetWaiter(w)
}

func (a *fairActor) try(w *fairWaiter, m *messages.Acquire) (bool, time.Duration, error) {
	sent := time.Now()
	ok, wait, err := a.rt.io.FairLock(a.rt.ctx, a.key.Name, m.Owner, a.leaseOf(m.Lease), w.w, sent, m.TryOnly)
	if err == nil && ok {
		h := a.granted(holdKey{m.Owner, messages.Exclusive}, sent, m.Lease, 0)
		if !m.Req.Answer(messages.Result{Granted: true, Lost: h.lost}) {
			a.release(&messages.Release{Owner: m.Owner})
		} else if m.Lease == 0 {
			a.arm(&a.base, a.watchdog/3)
		}
	}
	return ok, wait, err
}

// armRetry schedules the owner's next attempt at the script's estimate, so a
// lost message or a crashed waiter ahead never strands it. An estimate of
// (about) zero means the turn is due any moment: back off instead of polling.
func (a *fairActor) armRetry(w *fairWaiter, wait time.Duration) {
	if wait < fairMinBackoff {
		w.backoff = min(max(2*w.backoff, fairMinBackoff), fairMaxBackoff)
		wait = w.backoff
	} else {
		w.backoff = 0
	}
	if w.retry == nil {
		w.retry = a.after(wait, &messages.Wake{Reason: messages.WakeTimer, Owner: w.owner})
		return
	}
	w.retry.Reset(wait)
}

// abandoned takes an owner whose every call has given up out of the queue,
// so the next waiter is not stuck behind it.
func (a *fairActor) abandoned(w *fairWaiter) {
	if pendingAny(w.reqs) {
		return
	}
	if _, err := a.rt.io.FairCancel(a.rt.ctx, a.key.Name, w.owner, w.w); err != nil {
		a.rt.cfg.Logger.Debug("lockactor: fair cancel failed; the deadline will purge it", "lock", a.key.Name, "err", err)
	}
	a.forgetWaiter(w)
}

func pendingAny(reqs []*messages.Acquire) bool {
	for _, m := range reqs {
		if m.Req.Pending() {
			return true
		}
	}
	return false
}

func (a *fairActor) forgetWaiter(w *fairWaiter) {
	if w.retry != nil {
		w.retry.Stop()
	}
	a.unsubscribe(redisio.FairChannel(a.key.Name, w.owner), w.subID)
	delete(a.waiting, w.owner)
}

func (a *fairActor) release(m *messages.Release) {
	k := holdKey{m.Owner, messages.Exclusive}
	res, err := a.rt.io.FairUnlock(a.rt.ctx, a.key.Name, m.Owner, a.leaseFor(k), time.Now())
	if err != nil {
		answerRelease(m, messages.ReleaseResult{Err: err})
		return
	}
	a.released(k, res)
	answerRelease(m, messages.ReleaseResult{
		NotHeld: res == redisio.NotHeld,
		Gone:    res == redisio.Released || res == redisio.Left,
	})
}

func (a *fairActor) renewOne(k holdKey, lease time.Duration) (bool, error) {
	return a.rt.io.Renew(a.rt.ctx, a.key.Name, k.owner, lease)
}

func (a *fairActor) quiet() bool { return len(a.holds) == 0 && len(a.waiting) == 0 }
func (a *fairActor) tidy()       { a.holdBook.tidy() }

func (a *fairActor) shutdown() {
	a.holdBook.stop()
	for _, w := range a.waiting {
		a.forgetWaiter(w)
	}
}
