package actors

import (
	"strconv"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// Sharing a lock with other processes.
//
// A run of local hand-offs (relays or handoff.lua) ends, when other
// connections listen on the lock's channel, with a plain release and its
// message (see handoffTarget). The local waiters that message wakes then
// hold back before they try, so that a process slower than an actor takes
// its turn:
//
//   - yieldWindow, when every listener is a lockactor Client, whose actors
//     react as fast as ours. A count answered during it that finds a
//     foreign listener makes it long.
//   - Up to foreignWindow when a foreign waiter waits: a listener that is
//     not a lockactor Client, such as a Redisson client (on a busy machine
//     it hears the message milliseconds late, node-redisson unsubscribes
//     before it tries, and then it sends its script). Such a long yield
//     lasts until a release without a note (below): the foreign waiter's.
//     Then every Client races for the lock as on any message.
//
// Telling lockactor Clients from the others takes two things. While an
// actor listens on a lock's channel it also listens on the channel's
// redisio.ListenerMark, on the same connection, so a count asks for both
// (PUBSUB NUMSUB channel mark) and whatever the channel has more is
// foreign: a finding, which lasts foreignMemory. And while a Client has a
// finding, its releases carry a note: unlock.lua publishes on the mark,
// just before the lock's message, how many milliseconds the finding has
// left. A Client that hears a note takes the finding up for that long,
// waits for the foreign waiter as the others do, and notes its own
// releases; so a release without a note, while a finding stands, is the
// foreign waiter's, and renews it (a waiter that gets its turn at once is
// seldom subscribed when a count is taken).
//
// Two things still let a Client in ahead of the foreign waiter, and both
// end its run at its first release: an attempt already on its way when
// another Client's noted release came, granted after it; and another
// Client's noted release heard while holding. A count during a run that
// finds a foreign waiter not known before ends the run the same way: the
// waiter may have come just after the last run's count, and lost the race
// at that run's plain end.
//
// A long yield that ran to its end and then won the lock served nobody;
// after foreignUnused of those in a row (say a monitor subscribed to the
// channel, that never takes the lock), long yields are off for
// foreignQuiet. Findings and notes go on meanwhile.
const (
	// yieldWindow is the plain yield.
	yieldWindow = 2 * time.Millisecond
	// yieldFor: once other processes have won every yield for yieldFor,
	// the queue tries at once until it wins one, so that no peer, however
	// eager, starves us. It is counted in time, not in yields: when
	// several Clients share a lock, each loses yields to the others' runs
	// (HandoffRunTime each) as a matter of course, and a count would soon
	// have every Client skip its yield and race the slower peer again.
	yieldFor = 10 * HandoffRunTime
	// foreignWindow is the longest yield: a run's time.
	foreignWindow = HandoffRunTime
	// foreignMemory is how long a finding lasts unless renewed.
	foreignMemory = time.Second
	// foreignUnused long yields in a row that nobody took turn long yields
	// off for foreignQuiet.
	foreignUnused = 3
	foreignQuiet  = 500 * time.Millisecond
	// recount spaces the counts that yields ask for at their start: a
	// waiter is subscribed when a run ends, not only halfway through it,
	// and a Client whose runs are short never gets halfway.
	recount = 50 * time.Millisecond
)

// foreignWaiters is what an actor knows of listeners that are not
// lockactor Clients.
type foreignWaiters struct {
	until  time.Time // a finding stands until then
	long   bool      // the yield under way waits for the foreign waiter
	unused int       // long yields in a row that ran to their end and then won
	quiet  time.Time // no long yields before then
	notes  uint64    // other Clients' noted releases heard so far
	// n is how many foreign listeners the last count that found one
	// found (0: the finding came from a note, which says nothing of it:
	// one); turns, how many releases without a note the long yield under
	// way has heard. It ends at the n-th.
	n, turns int64
}

// knows reports whether this Client has a finding, and so notes its
// releases.
func (f *foreignWaiters) knows(now time.Time) bool { return now.Before(f.until) }

// waits reports whether yields wait for the foreign waiter.
func (f *foreignWaiters) waits(now time.Time) bool {
	return f.knows(now) && !now.Before(f.quiet)
}

// note is what a noted release says: the milliseconds the finding has left.
func (f *foreignWaiters) note(now time.Time) string {
	return strconv.FormatInt(max(0, f.until.Sub(now).Milliseconds()), 10)
}

// heard takes up what the release messages of n say: a note, another
// Client's finding; no note while a finding stands, the foreign waiter's
// release.
func (f *foreignWaiters) heard(n news, now time.Time) {
	switch {
	case n.msgs == 0:
	case !n.noted:
		if f.knows(now) {
			f.until = now.Add(foreignMemory)
		}
	default:
		ms, err := strconv.ParseInt(n.note, 10, 64)
		if until := now.Add(time.Duration(ms) * time.Millisecond); err == nil && until.After(f.until) {
			f.until = until
		}
	}
}

// served notes how a long yield ended: won by us after running to its end
// (nobody came), or not.
func (f *foreignWaiters) served(nobody bool, now time.Time) {
	if !nobody {
		f.unused = 0
		return
	}
	if f.unused++; f.unused >= foreignUnused {
		f.unused, f.quiet = 0, now.Add(foreignQuiet)
	}
}

// wokenToYield applies a wake's release messages (n) and resubscriptions
// to the queue's yields; prev is the verdict they replaced.
func (a *lockActor) wokenToYield(prev verdict, n news) {
	yields := a.scheme.handsOff() && a.others && (a.outrun.IsZero() || a.now.Sub(a.outrun) < yieldFor)
	switch {
	case a.wokenByMsg && yields:
		a.yieldTo(prev, n)
	case n.msgs == 0 && !a.waiters.empty() && yields && a.foreign.waits(a.now):
		// A (re)subscription: a release may have gone unheard, and the
		// foreign waiter goes first.
		a.yieldTo(prev, news{noted: true})
	}
}

// foreignNews takes up what the release messages of n say of a foreign
// waiter (see heard); ours says they are our own releases' echoes. Another
// Client's noted release heard while we hold ends our run at its next
// release: our grant came after that release, ahead of the foreign waiter
// it was for.
func (a *lockActor) foreignNews(n news, ours bool) {
	a.foreign.heard(n, a.now)
	if !n.noted || ours {
		return
	}
	a.foreign.notes++
	if a.held() && a.scheme.handsOff() {
		a.cutRun()
	}
}

// cutRun ends the run under way at its next release while a foreign
// waiter waits: our grant came after another Client's noted release (see
// foreignNews, tried).
func (a *lockActor) cutRun() {
	if a.foreign.waits(a.now) {
		a.handoffs = HandoffRun
	}
}

// yieldTo holds the queue back after the release messages n brings, so
// that another process goes first; prev is the verdict they replaced. A
// short yield under way keeps its end: were each message to start the
// window again, a peer releasing more often than yieldWindow would keep
// this queue from ever trying.
func (a *lockActor) yieldTo(prev verdict, n news) {
	on := a.yieldUnderWay(prev)
	if on && a.foreign.long || a.foreign.waits(a.now) {
		a.yieldLong(prev, on && a.foreign.long, n.noted)
		return
	}
	until := a.now.Add(yieldWindow)
	if on && prev.until.Before(until) {
		until = prev.until
	}
	if !on {
		a.yieldFrom = a.now
		a.recount()
	}
	a.verdict = verdict{until: until, all: true}
	a.yielding, a.wokenByMsg = true, false
}

// yieldUnderWay reports whether v is the verdict of a yield still under
// way: one that ends within the yield's span from its start. Anything else
// in its place (a refusal's TTL: a direct attempt was refused meanwhile)
// is no yield, and must not be kept as one, or a release heard after it
// would wake nobody.
func (a *lockActor) yieldUnderWay(v verdict) bool {
	span := yieldWindow
	if a.foreign.long {
		span = foreignWindow
	}
	return a.yielding && v.until.After(a.now) && !v.until.After(a.yieldFrom.Add(span))
}

// yieldLong holds the queue back after a noted release, until as many
// releases without a note as foreign waiters were counted (their turns),
// or foreignWindow; on says a long yield is under way (it keeps its end).
func (a *lockActor) yieldLong(prev verdict, on, noted bool) {
	switch {
	case !noted && on && a.foreign.turns+1 < a.foreign.n:
		a.foreign.turns++ // one foreign waiter had its turn; others wait too
		a.verdict = prev
	case !noted:
		if on {
			a.foreign.served(false, a.now)
		}
		a.verdict = verdict{}
		a.yielding, a.wokenByMsg, a.foreign.long = false, true, false
		return
	case on:
		a.verdict = prev
	default:
		a.yieldFrom, a.foreign.turns = a.now, 0
		a.verdict = verdict{until: a.now.Add(foreignWindow), all: true}
		a.recount()
	}
	a.yielding, a.wokenByMsg, a.foreign.long = true, false, true
}

// tried notes what a queued attempt that followed a long yield found: long
// says the yield ran to its end, won whether it got the lock.
func (a *lockActor) tried(at *lockAttempt, won bool) {
	if won && at.notes != a.foreign.notes {
		a.cutRun() // another Client's noted release came while the attempt was on its way
	}
	if at.long {
		a.foreign.served(won, a.now)
	}
}

// recount counts the listeners, unless a count has answered lately, or
// the last could not tell (a master with replicas: so will the next, and
// on a stopped master each would hold a connection until it times out).
func (a *lockActor) recount() {
	if !a.countUnknown && a.now.Sub(a.countedAt) >= recount {
		a.countOthers()
	}
}

// listen subscribes to the lock's channel, and first to its ListenerMark
// when the actor counts listeners (so a count never finds our channel
// without our mark). The mark's messages are notes: they say the next
// message on the channel is a lockactor Client's release.
func (a *lockActor) listen() {
	ch := a.scheme.channel(a.key.Name)
	if a.scheme.handsOff() {
		sig := &a.sig
		a.markID, _ = a.rt.ps.Subscribe(a.rt.ctx, redisio.ListenerMark(ch), func(ev redisio.Event) {
			if ev.Kind == redisio.Message {
				sig.note.Store(&ev.Payload)
			}
		})
	}
	a.heard = false
	a.subID = a.subscribe(ch, &a.sig, lockWake)
}

// unlisten leaves what listen joined, the channel first.
func (a *lockActor) unlisten() {
	ch := a.scheme.channel(a.key.Name)
	a.unsubscribe(ch, a.subID)
	a.unsubscribe(redisio.ListenerMark(ch), a.markID)
	a.subID, a.markID, a.heard = 0, 0, false
}

// subscribers is a count of the connections listening on the lock's
// channel.
type subscribers struct {
	l   redisio.Listeners
	err error
}

// counted applies a subscriber count: ours is one of them while we are
// subscribed; an unknown count means others may listen (foreign or not:
// the finding stands as it was). A foreign listener found during a short
// yield makes it long; one found afresh while we hold ends our run.
func (a *lockActor) counted(m *subscribers) {
	a.counting, a.countedAt = false, a.now
	a.countUnknown = m.err != nil || m.l.All < 0
	switch {
	case a.countUnknown:
		a.others = true
		return
	case a.subID != 0:
		a.others = m.l.All > 1
	default:
		a.others = m.l.All > 0
	}
	if !m.l.Foreign() {
		return
	}
	fresh := !a.foreign.knows(a.now)
	a.foreign.until, a.foreign.n = a.now.Add(foreignMemory), m.l.All-m.l.Ours
	if fresh && a.held() && a.scheme.handsOff() {
		a.cutRun() // see the comment at the top
	}
	if !a.foreign.long && a.yieldUnderWay(a.verdict) && a.foreign.waits(a.now) {
		a.verdict.until = a.yieldFrom.Add(foreignWindow)
		a.foreign.long = true
	}
}

// countOthers asks, in the background, whether other connections than
// ours listen on the lock's channel, and whether they are lockactor
// Clients'.
func (a *lockActor) countOthers() {
	if a.counting || a.spin != nil {
		return // a spin lock's peers listen on no channel: others stays true
	}
	a.counting = true
	b := &a.base
	a.rt.io.SubscribersThen(a.rt.ctx, a.scheme.channel(a.key.Name), func(l redisio.Listeners, err error) {
		b.post(&subscribers{l: l, err: err})
	})
}
