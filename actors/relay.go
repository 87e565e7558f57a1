package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
)

// A relay passes a hold from one local owner to the next without a word
// to Redis. Redis keeps the hold under the hash field of the owner that
// took it; the next local owner takes over that hold as it is (its field,
// its lease, its renewals: hold.field), and releases it under that field
// in its turn, or relays it again. A hot lock then costs Redis one grant
// and one release per run of local owners, not a script per owner.
//
// A relayed hold is worth what the hold it comes from is worth: its Lost
// closes no later than that hold's confirmed lease would have ended, and
// at once when a renewal finds the field gone. So a relay is made only
// for a watchdog hold (no fixed lease on either side, which Redis would
// have to be told of) whose last confirmation by Redis is younger than
// half the watchdog timeout and since the last release message that was
// not our own (a force unlock), and since Redis last confirmed the
// subscription (before, a force unlock may have gone unheard: no relay
// goes between a waiter's subscribe and its Subscribed event), while the
// subscription is not known to be down (Disconnected, not yet back: a
// force unlock now goes unheard), found lost by nothing, with no master
// switch being followed (master_watch.go); otherwise the release hands
// off through Redis (handoff.lua), which confirms the next grant. Runs
// are bounded as every hand-off run is (HandoffRun grants,
// HandoffRunTime): then, if other processes listen, the lock is released
// and published.
//
// A force unlock of the same Client stops relays of its name while it is
// under way, and holds confirmed before it ended are not relayed after it
// (force.go). Another Client's force unlock is known only by its message,
// so relays also stop while the channel is late: our own releases' echoes
// come more than echoLag after their replies, or one is overdue (echo.go).
// A message later than that before the channel shows it (the first run
// of a slow spell) still lets a hold it deleted be relayed until the
// message or a renewal comes, as a holder elsewhere goes on until its
// renewal fails.
//
// A spin lock never relays: it listens on no channel, so nothing would
// tell it of a force unlock (a torture run relayed a hold another Client
// had force-unlocked, twice, and the second owner held a ghost); each of
// its hand-offs asks Redis.
//
// While a hold relayed from owner o lives, Redis takes any request under
// o's field for o's own: o's next acquire waits for the relay to end
// (fieldBusy), and a TryLock of o's is refused here.

// relays reports whether o's release may relay its hold to head.
func (a *lockActor) relays(o *owed, head *messages.Acquire, now time.Time) bool {
	h := o.h
	if !relayChecked {
		return !a.rt.cfg.NoRelay && h != nil && o.last
	}
	return !a.rt.cfg.NoRelay && a.spin == nil && h != nil && o.last && h.lease == 0 && head.Lease == 0 &&
		!h.isLost() && h.cap.IsZero() && now.Sub(h.confirmed) < a.watchdog/2 && h.confirmed.After(a.doubted) &&
		a.heard && !a.down && a.rt.forced.allows(a.key.Name, h.confirmed) && !a.echo.behind(now) && !a.rt.following.Load()
}

// relay gives o's hold to head, the next local waiter: o's caller hears
// its hold is gone, and head holds under the same hash field.
func (a *lockActor) relay(o *owed, head *messages.Acquire) {
	a.waiters.remove(head.Req)
	o.answer(messages.ReleaseResult{Gone: true})
	a.ranHandoff()
	a.rt.cfg.Observer.HandedOff(a.key)
	a.grant(head, o.h.confirmed, 0, &relayed{field: o.field, until: o.h.until})
}

// relayed is what a relayed grant takes over from the hold it comes from.
type relayed struct {
	field string    // the hash field Redis keeps the hold under
	until time.Time // the latest Redis may keep it
}

// fieldBusy reports whether another local owner holds the lock under
// owner's hash field (a hold relayed from owner).
func (a *lockActor) fieldBusy(owner string) bool {
	for k, h := range a.holds {
		if h.field == owner && k.owner != owner {
			return true
		}
	}
	return false
}

// fieldFor is the hash field owner's requests go by (see holdBook.fieldOf).
func (a *lockActor) fieldFor(owner string) string {
	return a.holdBook.fieldOf(holdKey{owner, messages.Exclusive})
}
