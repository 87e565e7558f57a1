package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
)

// lockActor serves one owner-based lock name (Lock, FencedLock or
// ReadWriteLock) for one Client; its scheme holds what differs between them.
//
// Its states (phase): idle (nothing held, queued or owed: it may retire),
// held (local owners hold, nobody is queued), waiting (callers are queued),
// settling (only releases owed to Redis, or a request whose reply was lost,
// remain), retiring (it left the registry and forwards stragglers until it
// stops). Across all of them at most one state-changing script is in flight
// or unsettled (ledger), so a release never overtakes an acquire.
//
// Handlers only apply their event to the state; reconcile then decides what
// runs next, and it is the only code that takes waiters off the queue or
// grants them. It keeps this invariant, checked at the end of every pass by
// settle: while a waiter is queued, either a request is in flight or
// awaiting settlement, or the work timer is armed no later than the end of
// the holder's lease as last learned (a refusal's TTL, or the lease of a
// hold granted here); a local hold's release or loss also makes reconcile
// run.
type lockActor struct {
	scripted
	holdBook
	scheme  scheme
	spin    *spinner // non-nil: a spin lock, which never subscribes (spin.go)
	waiters waitQueue
	direct  []*messages.Acquire // attempts that skip the queue: TryLock, owners that already hold
	owed    owedQueue
	verdict verdict // what the last attempt or grant says of the holder
	phase   phase

	sig        signal // the lock channel's pub/sub news
	subID      uint64 // pub/sub handler id; 0 when not subscribed
	down       bool   // the subscription was Disconnected and is not back, as last heard: no relays
	heard      bool   // the subscription was confirmed (Subscribed) since listen: before, no relays
	wokenByMsg bool   // the next attempt answers a release message
	// handoffs counts releases handed straight to a local waiter in a row
	// (by a script or a relay), since runStart; after HandoffRun, or
	// HandoffRunTime, the next release frees the lock for everyone.
	handoffs int
	runStart time.Time
	// echo keeps the release messages we published and have yet to hear
	// (echo.go): a message while a local owner holds is our own echo, or
	// news (a force unlock) when no echo is due.
	echo echoBook
	// doubted is when news put the holds in doubt (see onWake): a hold is
	// relayed only if Redis confirmed it after that.
	doubted time.Time
	// news counts the events that made the verdict stale; an attempt's
	// refusal installs its verdict only if none came while it was in
	// flight (the refusal may predate the release the event announced).
	news uint64
	// late spaces the queue's attempts after grants that came back past
	// their lease.
	late lateGate

	// Sharing the lock with other processes (see handoffTarget, yield.go).
	others   bool      // other connections listen on the channel (true until counted)
	counting bool      // a subscriber count is in flight
	yielding bool      // the queue's next attempt follows a yield
	outrun   time.Time // the first of the yields in a row that another process won; zero if none
	markID   uint64    // pub/sub handler id on the channel's ListenerMark; 0 when not subscribed
	foreign  foreignWaiters
	// countedAt: when the last count answered (countUnknown: it could not
	// tell); yieldFrom: when the yield under way began.
	countedAt, yieldFrom time.Time
	countUnknown         bool
}

// phase names an actor's state.
type phase uint8

// The phases of a lock actor.
const (
	idle phase = iota
	held
	waiting
	settling
	retiring
)

// HandoffRun bounds a run of local hand-offs: then, if other processes
// listen on the lock's channel, the lock is released and published, and
// local waiters race the other processes' for it.
const HandoffRun = 64

// HandoffRunTime bounds a run of local hand-offs in time, as HandoffRun
// does in grants: a run of relays (relay.go) costs no Redis round trip, so
// long critical sections, not Redis, set its pace.
const HandoffRunTime = 20 * time.Millisecond

func newLockActor(rt *Runtime, key Key, e *entry, s scheme) *lockActor {
	a := &lockActor{scheme: s, others: true}
	a.init(rt, key, e)
	a.holdBook = newHoldBook(&a.base, rt.cfg.Watchdog)
	a.ledger.stalled = func(err error) { tellStalled(&a.direct, &a.owed, err) }
	return a
}

func (a *lockActor) receive(msg any) { a.run(msg, a) }

// handle applies the actor's own messages (see lockMachine).
func (a *lockActor) handle(msg any) bool {
	switch m := msg.(type) {
	case *messages.Acquire:
		a.onAcquire(m)
	case *messages.Release:
		a.owe(holdKey{m.Owner, m.Mode}, m)
	case *messages.Abandon:
		a.waiters.remove(m.Req)
	case *messages.Wake:
		a.onWake(a.sig.take())
	case *replied:
		a.ledger.onReply(m)
		a.echo.replied()
	case *subscribers:
		a.counted(m)
	case *messages.RenewTick:
		if a.renewAll(a.renewOne) {
			a.forgetVerdict() // a lost hold may have freed the lock
		}
	case *renewed:
		if a.renewed(m) {
			a.forgetVerdict()
		}
	case *messages.Extend:
		a.extend(m, a.renewOne)
	case *extended:
		if a.extended(m) {
			a.forgetVerdict()
		}
	case *messages.Lose:
		a.lose(m)
		a.forgetVerdict()
	case *switched:
		a.switched(m)
	case *holdsRead:
		if a.reread(m) {
			a.forgetVerdict()
		}
		a.ghostsIn(m)
	default:
		return false
	}
	return true
}

// forgetVerdict drops the verdict: something may have freed the lock.
func (a *lockActor) forgetVerdict() {
	a.verdict = verdict{}
	a.news++
}

// onAcquire queues a caller; TryLock and owners that already hold (their
// requests never queue behind waiters that may wait for them) go first.
func (a *lockActor) onAcquire(m *messages.Acquire) {
	if !m.Req.Pending() {
		return
	}
	if m.TryOnly || a.owns(m.Owner) {
		a.direct = append(a.direct, m)
		return
	}
	a.waiters.push(m)
}

// owns reports whether owner holds any view of the lock.
func (a *lockActor) owns(owner string) bool {
	for _, mode := range [...]messages.Mode{messages.Exclusive, messages.Read, messages.Write} {
		if _, ok := a.holds[holdKey{owner, mode}]; ok {
			return true
		}
	}
	return false
}

// owes reports whether a release is owed under the hash field owner's
// requests go by (its own, or a relayed hold's: see holdBook.fieldOf): no
// request of owner may be sent before Redis has it.
func (a *lockActor) owes(owner string) bool {
	return a.owed.owes(a.fieldFor(owner))
}

// onWake applies pub/sub news: a release elsewhere, or a (re)subscription
// after which messages may have been missed, makes the verdict stale.
func (a *lockActor) onWake(n news) {
	a.down = n.down
	if n.resync && !n.down {
		a.heard = true
	}
	ours := !n.resync && n.msgs <= int64(a.echo.awaited())
	if n.resync || n.msgs > int64(a.echo.awaited()) && a.held() {
		// A message that is not our echo while we hold: a force unlock. A
		// (re)subscription, or a connection lost: a force unlock since the
		// holds' confirmation may have gone unheard (a torture run relayed
		// a hold a ForceUnlock had deleted while the subscription was down
		// after a restart). Either way no hold is relayed until Redis
		// confirms it again; the next hand-off goes through handoff.lua.
		a.doubted = a.now
	}
	if n.resync {
		a.echo.resync()
	} else {
		a.echo.heard(int(n.msgs), a.now, a.ledger.busy())
	}
	a.foreignNews(n, ours) // yield.go
	if a.scheme.exclusive() && a.held() && (ours || n.msgs == 0) {
		return // our own release's echo, or a resubscription while we hold
	}
	if n.msgs == 0 && a.yieldUnderWay(a.verdict) {
		// A (re)subscription while the queue yields: the yield's end,
		// soon, is the retry that covers a message it missed.
		return
	}
	prev := a.verdict
	a.forgetVerdict()
	// The attempt this pass makes for the queue answers a release message:
	// if it wins, we requeue (see attempted). Only a waiter queued now can
	// have raced for it.
	a.wokenByMsg = n.msgs > 0 && !a.waiters.empty()
	a.wokenToYield(prev, n) // let another process go first (yield.go)
}

// step runs the next script due, in order: the settlement of a lost reply,
// owed releases, direct attempts, then an attempt for the queue. It returns
// false when nothing is due.
func (a *lockActor) step(now time.Time) bool {
	if taken, ran := a.ledger.turn(now); taken {
		return ran
	}
	a.promoteGhosts(&a.owed)
	switch {
	case a.runOwed(now):
	case a.runDirect():
	default:
		m := a.candidate(now)
		if m == nil {
			return false
		}
		a.try(m, true)
	}
	return true
}

// runDirect makes the oldest pending direct attempt whose owner owes no
// release; false if none. A TryLock for reading that a queued writer holds
// back (see heldBack) is refused without asking Redis, as sync.RWMutex's
// TryRLock is.
func (a *lockActor) runDirect() bool {
	m := popFree(&a.direct, a.owes)
	switch {
	case m == nil:
		return false
	case a.heldBack(m):
		m.Req.Answer(messages.Result{})
	case !a.owns(m.Owner) && a.fieldBusy(m.Owner):
		// Another local owner holds the lock under m's owner's hash field
		// (a relay): Redis would take m for a reentrant acquire.
		if m.TryOnly {
			m.Req.Answer(messages.Result{})
		} else {
			a.waiters.push(m)
		}
	default:
		a.try(m, false)
	}
	return true
}

// candidate is the waiter to make an attempt for: the head unless the
// verdict says it would be refused. On a read-write lock held for reading
// the refused head is a writer, and it holds the readers behind it back
// (see heldBack), except those whose owner holds a view already. An owner
// that owes Redis a release waits until Redis confirms it or its lease has
// surely run out (see owed).
func (a *lockActor) candidate(now time.Time) *messages.Acquire {
	head := a.waiters.front()
	if head == nil || a.owes(head.Owner) || a.fieldBusy(head.Owner) || a.late.shut(now) {
		return nil
	}
	if !a.verdict.refuses(head, now) {
		return head
	}
	var reader *messages.Acquire
	if a.waiters.reads > 0 && !a.verdict.all {
		a.waiters.each(func(m *messages.Acquire) bool {
			if m.Mode == messages.Read && a.owns(m.Owner) && !a.owes(m.Owner) {
				reader = m
			}
			return reader == nil
		})
	}
	return reader
}

// heldBack reports whether m, a read request that would skip the queue,
// must not be tried because a writer is queued: within a Client a waiting
// writer holds later readers back (sync.RWMutex's rule), or a steady flow
// of readers would starve it. The writer's own owner waits too: granted a
// read first, its queued write would be refused as an upgrade. An owner
// that holds any view already (a reentrant read, write-then-read) is never
// held back: it may be what the writer waits for.
func (a *lockActor) heldBack(m *messages.Acquire) bool {
	if m.Mode != messages.Read || a.owns(m.Owner) {
		return false
	}
	held := false
	a.waiters.each(func(w *messages.Acquire) bool {
		held = w.Mode == messages.Write
		return !held
	})
	return held
}

// settle arms the work timer for the earliest of: the settlement retry, an
// owed release, and — while waiters are queued and nothing is in flight —
// the verdict's end; and subscribes while anyone waits. A queued waiter with no verdict to wait on
// (cannot happen after a complete pass) gets an immediate retry: the
// invariant is enforced here, not assumed.
func (a *lockActor) settle() {
	a.wokenByMsg = false // it answers the message of this pass only
	var next soonest
	next.add(a.ledger.due())
	next.add(a.owed.due())
	// Waiters subscribe once nothing is in flight: a first attempt that is
	// granted needs no subscription, and one that was refused is followed
	// by the subscription's confirmation, which triggers a fresh attempt
	// for a release published in between.
	if !a.waiters.empty() && a.ledger.settled() {
		if a.subID == 0 && a.spin == nil {
			a.listen()
		}
		switch now := a.now; {
		case a.late.shut(now):
			next.add(a.late.until)
		case a.verdict.until.IsZero() && !a.owes(a.waiters.front().Owner) && !a.fieldBusy(a.waiters.front().Owner):
			a.rt.cfg.Logger.Debug("lockactor: waiter without a retry; retrying now", "lock", a.key.Name)
			next.add(now)
		}
		next.add(a.verdict.until)
	}
	a.wakeAt(next.at)
	a.phase = a.currentPhase()
	a.entry.waiters.Store(int64(a.waiters.len())) // for Runtime.Census
}

func (a *lockActor) currentPhase() phase {
	switch {
	case a.retiring:
		return retiring
	case !a.waiters.empty() || len(a.direct) > 0:
		return waiting
	case len(a.holds) > 0:
		return held
	case a.owed.len() > 0 || !a.ledger.settled():
		return settling
	}
	return idle
}

func (a *lockActor) quiet() bool { return a.currentPhase() == idle }

func (a *lockActor) tidy() {
	a.holdBook.tidy()
	if a.waiters.empty() {
		a.unlisten()
		a.verdict = verdict{} // no longer told of releases
		a.waiters = waitQueue{}
		a.spin.reset()
	}
	if a.quiet() {
		a.ledger.forget()
	}
}

func (a *lockActor) shutdown() {
	a.ledger.close()
	a.holdBook.stop()
	a.unlisten()
}

// verdict is what the actor knows of the holder: until when waiters need not
// try again. A message, a resubscription or a local release clears it.
type verdict struct {
	until time.Time // zero: nothing known, try now
	all   bool      // every other owner is refused; false: only writers (read mode)
}

// refuses reports whether m would be refused now, by what is known.
func (v verdict) refuses(m *messages.Acquire, now time.Time) bool {
	return !v.until.IsZero() && now.Before(v.until) && (v.all || m.Mode != messages.Read)
}
