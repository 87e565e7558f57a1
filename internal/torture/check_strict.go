package torture

import (
	"fmt"
	"slices"
	"time"
)

// The strict variant's own checks, as Violation.Check names them.
const (
	// VLostDeadline: a watchdog hold whose Lost closed (or had not closed
	// while its owner still held it) later than the end the runtime can
	// promise: the send time of the last confirmed grant or renewal plus
	// the watchdog timeout.
	VLostDeadline = "lost-past-lease-end"
	// VSettle: a name still had a key well after the run and its faults
	// were over.
	VSettle = "settle"
)

// StrictLimits are what CheckStrict needs besides Limits.
type StrictLimits struct {
	// Watchdog is every Client's watchdog timeout.
	Watchdog time.Duration
	// Replicas is the Clients' WithReplicaSync count: a renewal counts as
	// confirmed when the WAIT sent with it counted at least this many (or
	// when none was sent: the runtime then takes the reply as it is).
	Replicas int
	// LostSlack: how late after the computed end a Lost may close (the
	// runtime's deadline timer, and the goroutine that records the close,
	// run a little late on a busy machine).
	LostSlack time.Duration
}

// CheckStrict judges a run of SentinelStrictTopology without
// relaxing safety around failovers: unlike CheckTopology it cuts no hold
// at a failover, and leaves out no grant made during one.
//
//   - Mutual exclusion over SafeSpans as they are: each hold counts from
//     its grant until its owner called Unlock, its Lost closed or its fixed
//     lease could have run out. An overlap is therefore reported exactly
//     when the later hold was granted before the earlier holder was told
//     (Lost) or could know (lease), with its length.
//   - CheckLostDeadline: a watchdog hold's Lost closes by the end the
//     Client can compute from the confirmations it saw.
//   - CheckFencingTokens over the whole run: a fenced grant's token is
//     above every token granted before its call began, whichever Client
//     holds it and whatever the switches lost (tokens follow the server's
//     clock); and CheckClientTokens, one Client's own.
//   - CheckSettle: every name free soon after the run.
//   - As everywhere: hangs, call errors (an ErrNotHeld that no Lost or
//     lease explains is a holder that was not told), Lost after a release
//     that ran, liveness outside fault windows plus lim.Recovery.
//
// The failover windows (rx.Unsafe) excuse only what is not about safety:
// renewals seen inside one after their Unlock (scripts queued for an
// unreachable master go out late), and ghost probes overlapping one (the
// unhooked probe connection may still be on the other master).
func CheckStrict(l *Log, lim Limits, rx Relaxations, sl StrictLimits) []Violation {
	safe := SafeSpans(l)
	var vs []Violation
	vs = append(vs, exclusion(l, safe, lim, func(a, b Span) bool { return toldOfSwitch(l, a, b) })...)
	vs = append(vs, CheckLostDeadline(l, sl)...)
	vs = append(vs, CheckFencingTokens(l, safe)...)
	vs = append(vs, CheckClientTokens(l)...)
	vs = append(vs, CheckSettle(l)...)
	vs = append(vs, CheckHangs(l, lim)...)
	vs = append(vs, CheckCallErrors(rx.unjudgedUpgrades(l), safe)...)
	vs = append(vs, CheckLateLost(l)...)
	vs = append(vs, CheckLiveness(l, LiveSpans(l), lim)...)
	vs = append(vs, CheckRenewals(rx.unjudgedRenewals(l), lim)...)
	vs = append(vs, CheckGhostGrants(rx.unjudged(l))...)
	vs = append(vs, CheckStaleGrants(l)...)
	vs = append(vs, CheckFairBursts(l)...)
	slices.SortStableFunc(vs, func(a, b Violation) int { return a.At.Compare(b.At) })
	return vs
}

// CheckLostDeadline reports watchdog holds (no fixed lease) that went on
// past the end their Client could compute without their Lost closing: the
// hold is confirmed until the send time of its last confirmed grant or
// renewal plus sl.Watchdog, and from then on nothing in Redis need keep
// it. A confirmation counts only while the hold is still confirmed. The
// log gives upper bounds of the send times, so the end computed here is
// never earlier than the runtime's: a grant counts from its call's return
// (and so does a reentrant grant of the hold), a renewal from when the
// hook saw it go out, if its reply was 1 and the WAIT sent with it counted
// sl.Replicas (see RenewReply). Reported: a Lost that closed more than
// sl.LostSlack after that end, or none closed while the owner still held
// the hold (until its Unlock, or the end of the run) that long after it;
// when the end fell in a stall of the process's timers (Stall), the slack
// counts from the stall's end.
func CheckLostDeadline(l *Log, sl StrictLimits) []Violation {
	confirmed := map[string][]time.Time{} // by "<res>\x00<field>", sorted
	for _, r := range l.RenewReplies {
		if r.Acks < 0 || r.Acks >= sl.Replicas {
			k := r.Res + "\x00" + r.Field
			confirmed[k] = append(confirmed[k], r.T)
		}
	}
	for _, ts := range confirmed {
		slices.SortFunc(ts, time.Time.Compare)
	}
	regrants := map[int][]time.Time{} // by hold: reentrant grants and the first
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Op.acquires() && c.Out == OutOK {
			for _, id := range c.Holds {
				regrants[id] = append(regrants[id], c.End)
			}
		}
	}
	var vs []Violation
	for i := range l.Holds {
		h := &l.Holds[i]
		if h.Lease > 0 || h.Prim.Counted() || h.Prim == PrimLatch {
			continue
		}
		points := append(slices.Clone(regrants[h.ID]), h.Grant)
		for _, t := range confirmed[h.Res+"\x00"+h.Field()] {
			if !t.Before(h.AcqStart) {
				points = append(points, t)
			}
		}
		slices.SortFunc(points, time.Time.Compare)
		end, last := h.Grant.Add(sl.Watchdog), h.Grant
		for _, t := range points {
			if t.Before(end) && t.Add(sl.Watchdog).After(end) {
				end, last = t.Add(sl.Watchdog), t
			}
		}
		held := h.End
		if held.IsZero() {
			held = l.End
		}
		late := end.Add(sl.LostSlack)
		if until := stalledUntil(l.Stalls, end); !until.IsZero() {
			// The process's timers ran late when the deadline fell due.
			late = maxTime(late, until.Add(sl.LostSlack))
		}
		switch {
		case !h.Lost.IsZero() && h.Lost.After(late):
			vs = append(vs, Violation{Check: VLostDeadline, At: end, Msg: fmt.Sprintf(
				"%s: %s hold #%d (g%d, owner %s) granted %s: last confirmed grant or renewal sent by %s, so it ended by %s; Lost closed at %s, %v later",
				h.Res, h.Prim, h.ID, h.G, h.Owner, l.at(h.Grant), l.at(last), l.at(end), l.at(h.Lost), h.Lost.Sub(end).Round(time.Millisecond))})
		case h.Lost.IsZero() && held.After(late):
			vs = append(vs, Violation{Check: VLostDeadline, At: end, Msg: fmt.Sprintf(
				"%s: %s hold #%d (g%d, owner %s) granted %s: last confirmed grant or renewal sent by %s, so it ended by %s; its owner still held it at %s (%v later) and Lost had not closed",
				h.Res, h.Prim, h.ID, h.G, h.Owner, l.at(h.Grant), l.at(last), l.at(end), l.at(held), held.Sub(end).Round(time.Millisecond))})
		}
	}
	return vs
}

// Settle is what the strict variant saw of the workload's names once the
// workers had stopped and the last fault was over (From): each name was
// read until it had no key, for at most Within (a second plus the longest
// lease in use).
type Settle struct {
	From   time.Time
	Within time.Duration
	Names  []NameSettle
}

// NameSettle is one name after the run: when it was first seen with no key
// (zero: not by From+Within), and what was left then.
type NameSettle struct {
	Name string
	Free time.Time
	Left string
}

// CheckSettle reports the names of l.Settle that were not free within its
// bound.
func CheckSettle(l *Log) []Violation {
	if l.Settle == nil {
		return nil
	}
	s := l.Settle
	due := s.From.Add(s.Within)
	var vs []Violation
	for _, n := range s.Names {
		switch {
		case n.Free.IsZero():
			vs = append(vs, Violation{Check: VSettle, At: due, Msg: fmt.Sprintf(
				"%s: not free %v after the run and its faults were over (%s): %s", n.Name, s.Within, l.at(s.From), n.Left)})
		case n.Free.After(due):
			vs = append(vs, Violation{Check: VSettle, At: due, Msg: fmt.Sprintf(
				"%s: free only at %s, %v after the run and its faults were over (%s), more than %v", n.Name, l.at(n.Free),
				n.Free.Sub(s.From).Round(time.Millisecond), l.at(s.From), s.Within)})
		}
	}
	return vs
}

// longestLease is the longest lease a call of l asked for, or watchdog if
// longer: a name released by nobody is free again at most that long after
// its last grant or renewal.
func longestLease(l *Log, watchdog time.Duration) time.Duration {
	d := watchdog
	for i := range l.Calls {
		d = max(d, l.Calls[i].Lease)
	}
	return d
}
