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
// semAttempt, semGiveBack and semAdjust (semaphore_ops.go), permAttempt and
// permGiveBack (permit.go), cdAdjust (countdown.go).
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
	// Redis). lost is the error that had lost its reply.
	notRun(lost error)
	// unknown: nobody can tell any more whether the request ran (Redis was
	// out of reach for longer than its latch record lives). Whatever it did
	// to a lock has expired by now (a record outlives the lease it carries;
	// see keepFor); a semaphore's count cannot be known, and each request
	// errs on the side of fewer permits. fail has run before.
	unknown()
}

// ledger numbers an actor's requests, keeps the one in flight until its
// reply comes back as a message (replied), and holds the one whose reply was
// lost until Redis says whether it ran (resolved). While a request is in
// flight or unsettled the actor sends no other state-changing script for its
// name: a latch remembers one request, and the next would overwrite it; and
// one at a time is what keeps a release from overtaking an acquire.
//
// The actor never waits for Redis: it hands the request to redisio, which
// sends it with its master's next pipeline, and goes on with its mailbox.
type ledger struct {
	b     *base
	latch string        // redisio.LatchKey of the name, Client and kind
	keys  *redisio.Keys // the name and latch as requests send them

	last     uint64  // the sequence number of the last request sent
	inflight request // sent; its reply has not come back yet
	inflOp   redisio.Op
	inflSent time.Time
	pending  *unsettled
	asking   bool // a settlement of pending is in flight

	// forgotten: the latch of the last request was deleted (or never
	// written), so retiring has nothing to clean up.
	forgotten bool

	// stalled hears the error of each failed settlement from the second
	// on. Nothing else is sent for the name until the ledger settles, so
	// the actor tells the callers that cannot be served until then (a
	// TryLock, an Unlock whose release waits its turn) rather than leave
	// them waiting for an outage to end; see tellStalled.
	stalled func(err error)
}

// unsettled is a request whose reply was lost.
type unsettled struct {
	req     request
	op      redisio.Op
	sent    time.Time // when it was handed to redisio
	err     error     // the error that lost the reply
	told    bool      // fail has run
	fails   int       // settlements that Redis did not answer
	due     time.Time
	backoff backoff
}

// Resolve retries after a failed settlement back off from resolveMin to
// resolveMax.
const (
	resolveMin = 10 * time.Millisecond
	resolveMax = time.Second
)

// replied carries a request's reply back to its actor.
type replied struct {
	seq   uint64
	reply redisio.Reply
}

// resolved carries the answer to a settlement back to its actor.
type resolved struct {
	seq   uint64
	s     redisio.Settlement
	reply redisio.Reply
	err   error
}

// newLedger is the ledger of b's actor: its latch is its own, even where
// actors of other kinds share its name (and its hash).
func newLedger(b *base) ledger {
	latch := redisio.LatchKey(b.key.Name, b.rt.cfg.ClientID, b.key.Kind.tag())
	return ledger{b: b, latch: latch, keys: redisio.NewKeys(b.key.Name, latch), forgotten: true}
}

// send hands r to redisio and returns; its reply comes back as a replied
// message (or at once, when r failed before it could be queued).
func (l *ledger) send(r request) {
	op := redisio.Op{Latch: l.latch, Keys: l.keys, Seq: l.b.rt.seq.Add(1), Keep: r.keep()}
	l.last, l.forgotten = op.Seq, false
	l.inflight, l.inflOp, l.inflSent = r, op, l.b.now
	b, seq := l.b, op.Seq // captured by value: op itself stays off the heap
	op.Then = func(rep redisio.Reply) { b.post(&replied{seq: seq, reply: rep}) }
	if rep := r.run(op); rep.Err != redisio.ErrPending {
		l.onReply(&replied{seq: seq, reply: rep})
	}
}

// onReply applies the reply of the request in flight. A reply lost in
// transit leaves the request unsettled: the actor's next steps wait for
// its settlement. It reports false for a reply it was not waiting for.
func (l *ledger) onReply(m *replied) bool {
	r, op := l.inflight, l.inflOp
	if r == nil || op.Seq != m.seq {
		return false
	}
	l.inflight = nil
	if m.reply.Failed() && redisio.Unknown(m.reply.Err) {
		l.pending = &unsettled{req: r, op: op, sent: l.inflSent, err: m.reply.Err, due: l.b.now}
		return true
	}
	r.apply(m.reply)
	return true
}

// turn is the ledger's part of a reconcile step: nothing else may run while
// a request is in flight or its reply unsettled. taken reports that the
// step is the ledger's (a settlement was sent, or one is in flight or not
// yet due); ran, that something was sent.
func (l *ledger) turn(now time.Time) (taken, ran bool) {
	switch {
	case l.inflight != nil || l.asking:
		return true, false
	case l.pending == nil:
		return false, false
	case now.Before(l.pending.due):
		return true, false
	}
	l.settle()
	return true, true
}

// busy reports whether a request or a settlement is in flight.
func (l *ledger) busy() bool { return l.inflight != nil || l.asking }

// settled reports whether no request is in flight or awaits settlement.
func (l *ledger) settled() bool { return l.pending == nil && l.inflight == nil }

// settle asks Redis whether the unsettled request ran; the answer comes
// back as a resolved message.
func (l *ledger) settle() {
	l.asking = true
	seq, b := l.pending.op.Seq, l.b
	b.rt.io.ResolveThen(b.rt.ctx, l.pending.op, func(s redisio.Settlement, r redisio.Reply, err error) {
		b.post(&resolved{seq: seq, s: s, reply: r, err: err})
	})
}

// onResolved applies a settlement's answer. If Redis did not answer, the
// request's callers are told of the original error (once) and the question
// is asked again later.
func (l *ledger) onResolved(m *resolved) {
	p := l.pending
	if !l.asking || p == nil || p.op.Seq != m.seq {
		return
	}
	l.asking = false
	if m.err != nil {
		if !p.told {
			p.told = true
			p.req.fail(p.err)
		}
		if p.fails++; p.fails >= 2 && l.stalled != nil {
			l.stalled(m.err)
		}
		p.due = l.b.now.Add(p.backoff.next(resolveMin, resolveMax))
		return
	}
	l.pending = nil
	l.b.rt.cfg.Logger.Debug("lockactor: lost reply settled", "lock", l.b.key.Name, "seq", p.op.Seq,
		"settlement", m.s, "reply", m.reply.Val, "err", p.err)
	switch {
	case m.s == redisio.Ran:
		p.req.apply(m.reply)
	case m.s == redisio.NotRun || l.b.now.Sub(p.sent) < p.op.Keep*9/10:
		// No record, while one of the request would still live: it did not
		// run (and the settlement cancelled it).
		p.req.notRun(p.err)
	default:
		// No record, and one may have expired: nobody can tell.
		l.b.rt.cfg.Logger.Error("lockactor: a request's outcome is unknown: Redis was out of reach for longer than its latch record lives",
			"lock", l.b.key.Name, "err", p.err, "record", p.op.Keep)
		if !p.told {
			p.req.fail(p.err)
		}
		p.req.unknown()
	}
}

// due is when the ledger needs the actor again; zero when it does not (an
// answer in flight comes as a message).
func (l *ledger) due() time.Time {
	if l.pending == nil || l.asking {
		return time.Time{}
	}
	return l.pending.due
}

// forget deletes the latch once the actor is about to retire: its last
// request is settled, so nobody will ask about it again.
func (l *ledger) forget() {
	if l.forgotten || !l.settled() {
		return
	}
	l.forgotten = true
	l.b.rt.io.ForgetLatch(l.latch, l.last)
}

// close has the latch deleted as the Client closes, its last request
// settled or not: nothing will ask about it any more, and a Client leaves
// no records behind. The runtime's connection deletes it once every
// pipeline has been sent (redisio.Conn.ForgetAtClose), so no request of the
// name can write it again after.
func (l *ledger) close() {
	if l.forgotten {
		return
	}
	l.forgotten = true
	l.b.rt.io.ForgetAtClose(l.latch, l.last)
}

// keepFor is how long the record of a request that carries lease lives: the
// runtime's LatchKeep, and never less than twice the lease, so that a
// record found expired means that whatever the request did to a lock has
// expired too. Records are deleted when their actor retires (forget), so
// their life only matters when Redis stays out of reach (a settlement
// must find the record) and for a Client that died (its records expire).
func (l *ledger) keepFor(lease time.Duration) time.Duration {
	return max(l.b.rt.cfg.LatchKeep, 2*lease)
}

// defaultLatchKeep is the least life of a latch record: an outage shorter
// than this never leaves a request's outcome unknown.
const defaultLatchKeep = time.Hour

// errNotApplied answers a request that Redis never ran, when its reply had
// been lost and the caller still waits.
var errNotApplied = errors.New("the request did not reach Redis; nothing changed")
