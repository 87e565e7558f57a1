package actors

import (
	"errors"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// request is one state-changing script an actor sends, with what to do with
// its reply. Every such script runs latched (see redisio), so it is applied
// at most once however often go-redis sends it. The kinds: lockAttempt and
// lockRelease (lock_ops.go), fairAttempt and fairRelease (fair_ops.go),
// semAttempt, semGiveBack and semAdjust (semaphore.go).
type request interface {
	// keep is how long the request's latch must outlive it.
	keep() time.Duration
	// run sends the script.
	run(op redisio.Op) redisio.Reply
	// apply takes the reply: the script's answer or its error. It runs once,
	// also when the reply was lost and the latch later told what it was.
	apply(redisio.Reply)
	// fail tells the request's callers that it failed, before its outcome is
	// known; apply or notRun still follows. Answers are once-only, so apply
	// may answer again harmlessly.
	fail(err error)
	// notRun: the request never ran and now never will (it was cancelled in
	// Redis).
	notRun()
}

// ledger numbers an actor's requests and holds the one whose reply was lost
// until Redis says whether it ran. While one is unsettled the actor sends no
// other state-changing script for its name: a latch remembers one request,
// and the next would overwrite it.
type ledger struct {
	rt    *Runtime
	latch string // redisio.LatchKey of the name and Client

	last     uint64        // the sequence number of the last request sent
	lastKeep time.Duration // how long its latch lives
	pending  *unsettled

	// forgotten: the latch of the last request was deleted (or never
	// written), so retiring has nothing to clean up.
	forgotten bool
}

// unsettled is a request whose reply was lost.
type unsettled struct {
	req     request
	op      redisio.Op
	err     error // the error that lost the reply
	told    bool  // fail has run
	due     time.Time
	backoff time.Duration
}

// Resolve retries after a failed settlement back off from resolveMin to
// resolveMax.
const (
	resolveMin = 10 * time.Millisecond
	resolveMax = time.Second
)

func newLedger(rt *Runtime, name string) ledger {
	return ledger{rt: rt, latch: redisio.LatchKey(name, rt.cfg.ClientID), forgotten: true}
}

// send runs r now. A reply lost in transit leaves r unsettled: the caller's
// next steps wait for settle.
func (l *ledger) send(r request) {
	op := redisio.Op{Latch: l.latch, Seq: l.rt.seq.Add(1), Keep: r.keep()}
	l.last, l.lastKeep, l.forgotten = op.Seq, op.Keep, false
	reply := r.run(op)
	if reply.Failed() && redisio.Unknown(reply.Err) {
		l.pending = &unsettled{req: r, op: op, err: reply.Err, due: time.Now()}
		return
	}
	r.apply(reply)
}

// turn is the ledger's part of a reconcile step: nothing else may run while
// a reply is unsettled. taken reports that the step is the ledger's (a
// settlement ran, or one is pending but not yet due); ran, that something
// was sent.
func (l *ledger) turn(now time.Time) (taken, ran bool) {
	if l.pending == nil {
		return false, false
	}
	if now.Before(l.pending.due) {
		return true, false
	}
	l.settle()
	return true, true
}

// settled reports whether no request awaits settlement.
func (l *ledger) settled() bool { return l.pending == nil }

// settle asks Redis whether the unsettled request ran, and applies the
// answer. If Redis does not answer, the request's callers are told of the
// original error (once) and the question is asked again later.
func (l *ledger) settle() {
	p := l.pending
	ran, reply, err := l.rt.io.Resolve(l.rt.ctx, p.op)
	if err != nil {
		if !p.told {
			p.told = true
			p.req.fail(p.err)
		}
		p.backoff = min(max(2*p.backoff, resolveMin), resolveMax)
		p.due = time.Now().Add(p.backoff)
		return
	}
	l.pending = nil
	if ran {
		p.req.apply(reply)
		return
	}
	p.req.notRun()
}

// due is when the ledger needs the actor again; zero when it does not.
func (l *ledger) due() time.Time {
	if l.pending == nil {
		return time.Time{}
	}
	return l.pending.due
}

// forget deletes the latch once the actor is about to retire: its last
// request is settled, so nobody will ask about it again. A short-lived
// record (finalKeep) is left to expire.
func (l *ledger) forget() {
	if l.forgotten || l.pending != nil || l.lastKeep <= finalKeep {
		return
	}
	l.forgotten = true
	l.rt.io.ForgetLatch(l.latch, l.last)
}

// latchKeep is how long a lock request's latch lives: past the lease its
// reply could matter for, and past go-redis's retries.
func latchKeep(lease time.Duration) time.Duration {
	return max(lease, 10*time.Second) + 10*time.Second
}

// finalKeep is the latch's life for a release that leaves the actor nothing
// to hold, await or owe (a lock's usual last request): long enough for
// go-redis's re-sends and an immediate settlement, short enough that the
// latch expires by itself and needs no deletion when the actor retires. A
// settlement that comes later finds no record and concludes "did not run":
// the release is sent again and finds nothing held, which changes nothing,
// since no new request on the name goes out before the settlement.
const finalKeep = 5 * time.Second

// errNotApplied answers a request that Redis never ran, when its reply had
// been lost and the caller still waits.
var errNotApplied = errors.New("the request did not reach Redis; nothing changed")
