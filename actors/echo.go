package actors

import "time"

// A lock actor hears its own releases' messages come back on the lock's
// channel (their echoes). Counting them tells a message of ours from news
// (another Client's release, or a force unlock while we hold: see onWake);
// timing them tells how late the channel is. A relay (relay.go) trusts the
// channel to bring a force unlock's message before it passes a hold on, so
// it stops while the channel is late: a torture window that delays every
// pub/sub read by 20-120 ms is then met by hand-offs through Redis, which
// finds a deleted hold, instead of by relays of it.

// echoLag is how long after a release's reply its echo may come for the
// channel to count as on time. A message is pushed to the subscription as
// the reply is to the caller, so on time they come within a scheduling
// delay of each other.
const echoLag = 10 * time.Millisecond

// echoForget is how long an echo is awaited: one not heard by then (lost
// with a connection, or never sent) is given up, and the channel counts as
// late until the next echo comes on time.
const echoForget = time.Second

// echoBook is what a lock actor awaits on its channel and what the last
// echoes said of it.
type echoBook struct {
	due   []time.Time // the replies of our published releases whose echo is awaited, oldest first
	early int         // messages heard, beyond those awaited, while a request was in flight
	late  bool        // the last echo heard came more than echoLag after its reply
}

// awaited is how many echoes are due.
func (e *echoBook) awaited() int { return len(e.due) }

// published records a release of ours whose message went out, replied at
// now: its echo is awaited, unless a message heard while it was in flight
// was that echo (then the channel is on time).
func (e *echoBook) published(now time.Time) {
	if e.early > 0 {
		e.early--
		e.late = false
		return
	}
	stale := 0
	for stale < len(e.due) && now.Sub(e.due[stale]) > echoForget {
		stale++
	}
	if stale > 0 {
		e.due = append(e.due[:0], e.due[stale:]...)
		e.late = true
	}
	e.due = append(e.due, now)
}

// heard takes n messages heard at now as the oldest awaited echoes, as far
// as they go; busy says a request is in flight, whose echo the rest may
// be. The channel is late if the oldest of them came past echoLag.
func (e *echoBook) heard(n int, now time.Time, busy bool) {
	k := min(n, len(e.due))
	if k > 0 {
		e.late = now.Sub(e.due[0]) > echoLag
		e.due = append(e.due[:0], e.due[k:]...)
	}
	if busy {
		e.early += n - k
	}
}

// replied forgets the messages heard during the request that replied: the
// reply has credited the one it awaited.
func (e *echoBook) replied() { e.early = 0 }

// resync forgets the echoes awaited: a (re)subscription may have missed
// them.
func (e *echoBook) resync() { e.due, e.early = e.due[:0], 0 }

// behind reports whether the channel is late at now: its last echo came
// late, or one is overdue.
func (e *echoBook) behind(now time.Time) bool {
	return e.late || len(e.due) > 0 && now.Sub(e.due[0]) > echoLag
}
