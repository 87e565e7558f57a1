package torture

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// CheckHangs reports calls that returned more than lim.HangSlack after their
// context ended (or never returned).
func CheckHangs(l *Log, lim Limits) []Violation {
	var vs []Violation
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.CtxEnd.IsZero() {
			vs = append(vs, noDeadlineHang(l, c, lim)...)
			continue
		}
		end, how := c.End, "returned"
		if !c.Returned() {
			end, how = l.End, "had not returned by the end of the run,"
		}
		if late := end.Sub(c.CtxEnd); late > lim.HangSlack {
			vs = append(vs, Violation{Check: VHang, At: c.CtxEnd, Msg: fmt.Sprintf(
				"%v: %s %s (g%d, %s, owner %v) started %s, context ended %s, %s %v later (-> %s %s)",
				c.Res, c.Prim, c.Op, c.G, c.Client, c.Owners, l.at(c.Start), l.at(c.CtxEnd), how,
				late.Round(time.Millisecond), c.Out, c.Err)})
		}
	}
	return vs
}

// CheckCallErrors reports results no call may return: ErrInvalidArgument,
// ErrClosed (every call is made before Close), a panic, and ErrNotHeld from
// an Unlock whose hold was not ended by Lost, a lease, a ForceUnlock or a
// restart, and whose owner made no ambiguous call on the name before.
func CheckCallErrors(l *Log, safe []Span) []Violation {
	spanOf := map[int]Span{}
	for _, s := range safe {
		spanOf[s.H.ID] = s
	}
	var vs []Violation
	for i := range l.Calls {
		c := &l.Calls[i]
		switch c.Out {
		case OutInvalid, OutClosed, OutPanic:
			vs = append(vs, Violation{Check: VErrors, At: c.End, Msg: fmt.Sprintf(
				"%v: %s %s (g%d, %s, owner %v) at %s returned %s: %s", c.Res, c.Prim, c.Op, c.G, c.Client, c.Owners, l.at(c.Start), c.Out, c.Err)})
		case OutNotHeld:
			if !judgedNotHeld(c) || notHeldExplained(l, c, spanOf) {
				continue
			}
			var desc []string
			for _, id := range c.Holds {
				if s, ok := spanOf[id]; ok {
					desc = append(desc, l.describe(s))
				}
			}
			vs = append(vs, Violation{Check: VErrors, At: c.End, Msg: fmt.Sprintf(
				"%v: %s %s (g%d, %s, owner %v) [%s, %s] returned ErrNotHeld, but no Lost, lease, ForceUnlock, restart or earlier ambiguous call explains it: %v",
				c.Res, c.Prim, c.Op, c.G, c.Client, c.Owners, l.at(c.Start), l.at(c.End), desc)})
		}
	}
	return vs
}

// judgedNotHeld reports whether an ErrNotHeld from c needs a cause: an
// Unlock's, or a permit's Release or UpdateLease (a permit is not held
// once its lease may have ended, and not before).
func judgedNotHeld(c *Call) bool {
	return c.Op == OpUnlock || (c.Prim == PrimPermit && (c.Op == OpRelease || c.Op == OpUpdateLease))
}

// notHeldExplained reports whether an Unlock's ErrNotHeld has a legitimate
// cause.
func notHeldExplained(l *Log, c *Call, spanOf map[int]Span) bool {
	for _, id := range c.Holds {
		s, ok := spanOf[id]
		if !ok {
			continue
		}
		h := s.H
		if s.By != ByUnlock && s.By != ByRunEnd {
			return true
		}
		// Ended by something during the Unlock call itself.
		if !h.LeaseUntil.IsZero() && h.LeaseUntil.Before(c.End) {
			return true
		}
		if watchdogRanOutDuring(l, h, c) {
			return true
		}
		for j := range l.Calls {
			o := &l.Calls[j]
			if o.Op == OpForceUnlock && len(o.Res) > 0 && o.Res[0] == h.Res && o.Start.Before(c.End) && (o.End.IsZero() || o.End.After(h.AcqStart)) {
				return true
			}
		}
		if restartDuring(l, h.Res, Interval{h.AcqStart, c.End}) {
			return true
		}
		if switchDuring(l, h.AcqStart, c.End) {
			return true
		}
		for _, f := range l.Faults {
			// Its release was refused (for its Client, or every Client of
			// the server) while the hold's lease ran out.
			if f.Kind == FaultBlock && f.Server == serverOf(h.Res) && strings.Contains(f.Detail, ClassRelease) &&
				f.Start.Before(c.End) && f.End.After(c.Start) {
				return true
			}
		}
	}
	// An earlier call of the same owner on the name during this hold whose
	// effect is unknown (a lost reply, a release still queued) may have
	// changed the count.
	from := time.Time{}
	for _, id := range c.Holds {
		if s, ok := spanOf[id]; ok && (from.IsZero() || s.H.AcqStart.Before(from)) {
			from = s.H.AcqStart
		}
	}
	for j := range l.Calls {
		o := &l.Calls[j]
		if o.ID == c.ID || !o.Start.Before(c.Start) || o.Start.Before(from) || !o.Out.Ambiguous() {
			continue
		}
		for k, r := range o.Res {
			for m, cr := range c.Res {
				if r == cr && k < len(o.Owners) && m < len(c.Owners) && o.Owners[k] == c.Owners[m] {
					return true
				}
			}
		}
	}
	return false
}

// watchdogRanOutDuring reports whether watchdog hold h's lease may have run
// out in Redis while Unlock call c went on: the last grant or renewal of
// its field seen before c ended, plus the lease the grant set, falls inside
// c. A release waits for its name's request in flight, and every command of
// a Client waits for that Client's pipeline in flight, so a late reply (a
// FaultLate window, a slow link) holds it back; the renewal the Unlock made
// needless is dropped meanwhile, and Redis lets the hold go before the
// release runs. A lease that ran out before c began is not explained here:
// the runtime counts a hold's lease from its send, so Lost would have
// closed first.
func watchdogRanOutDuring(l *Log, h *Hold, c *Call) bool {
	if h.Lease > 0 || h.Prim.Counted() {
		return false
	}
	var last time.Time
	var lease time.Duration
	from := h.AcqStart // the grant's script ran in its call; a relay's, before
	if h.Relayed != "" {
		from = time.Time{}
	}
	for _, r := range l.Runs {
		if r.Grants && r.Res == h.Res && r.Owner == h.Field() && !r.T.Before(from) && !r.T.After(h.Grant) && r.T.After(last) {
			last, lease = r.T, r.Lease
		}
	}
	if last.IsZero() {
		return false
	}
	for _, rn := range l.Renewals {
		if rn.Res == h.Res && rn.Field == h.Field() && rn.T.After(last) && rn.T.Before(c.End) {
			last = rn.T
		}
	}
	end := last.Add(lease)
	return !end.Before(c.Start) && end.Before(c.End)
}

// field is the hash field call c uses on its i-th resource.
func (c *Call) field(i int) string {
	if c.Prim == PrimWrite {
		return c.Owners[i] + ":write"
	}
	return c.Owners[i]
}

// renewIndex is, per resource and hash field, the holds and acquire calls
// that make a renewal legitimate.
type renewIndex struct {
	holds   []*Hold // by Done
	calls   []*Call // acquire calls, by Start
	unlocks map[int][]Outcome
}

// CheckRenewals reports watchdog renewals of an owner that holds nothing:
//
//   - renewal-after-unlock: after the owner's last Unlock of a hold returned
//     (plus lim.RenewSlack for one already in flight), whatever it returned,
//     and before the owner's next Lock or TryLock call started;
//   - renewal-without-hold: with no hold of that owner open, no acquire call
//     of it in flight or ended within lim.Recovery (a grant that raced a
//     cancellation is given back a little later), outside the windows above.
//     An owner no call or hold names may be a Mutex acquisition's that did
//     not end in a hold (its owner is learnt only from a grant): a Mutex
//     call of its Client on the name, in flight or ended within
//     lim.Recovery, covers it.
//
// Each owner and name is reported once per kind, with the count and the time
// of the last one.
func CheckRenewals(l *Log, lim Limits) []Violation {
	idx := map[string]*renewIndex{}
	get := func(res, field string) *renewIndex {
		k := res + "\x00" + field
		if idx[k] == nil {
			idx[k] = &renewIndex{}
		}
		return idx[k]
	}
	for i := range l.Holds {
		h := &l.Holds[i]
		if !h.Prim.Counted() {
			ri := get(h.Res, h.Field())
			ri.holds = append(ri.holds, h)
		}
	}
	unlocks := map[int][]Outcome{}      // what each hold's Unlock calls returned
	unnamed := map[string]*renewIndex{} // Mutex calls with no owner yet, by name and Client
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Op == OpUnlock {
			for _, id := range c.Holds {
				unlocks[id] = append(unlocks[id], c.Out)
			}
		}
		if c.Op.acquires() && !c.Prim.Counted() {
			for j, r := range c.Res {
				if strings.HasPrefix(c.Owners[j], PendingOwner) {
					k := r + "\x00" + c.Client
					if unnamed[k] == nil {
						unnamed[k] = &renewIndex{}
					}
					unnamed[k].calls = append(unnamed[k].calls, c)
					continue
				}
				ri := get(r, c.field(j))
				ri.calls = append(ri.calls, c)
			}
		}
	}
	for _, ri := range unnamed {
		slices.SortFunc(ri.calls, func(a, b *Call) int { return a.Start.Compare(b.Start) })
	}
	for _, ri := range idx {
		ri.unlocks = unlocks
		slices.SortFunc(ri.holds, func(a, b *Hold) int { return doneOf(l, a).Compare(doneOf(l, b)) })
		slices.SortFunc(ri.calls, func(a, b *Call) int { return a.Start.Compare(b.Start) })
	}
	type report struct {
		first Renewal
		why   string
		n     int
		last  time.Time
	}
	reports := map[string]*report{}
	var order []string
	for _, rn := range l.Renewals {
		ri := idx[rn.Res+"\x00"+rn.Field]
		kind, why := VStray, "it never held it"
		if ri != nil {
			kind, why = ri.judge(l, rn.T, lim)
		}
		// A Mutex call's owner is named only once it holds: a field seen
		// in a renewal while a Mutex call of its Client on the name is in
		// flight (or just ended) may be that call's, given back unnamed,
		// even when a hold relayed from it is recorded later.
		if u := unnamed[rn.Res+"\x00"+rn.Client]; kind != "" && u != nil {
			if mk, _ := u.judge(l, rn.T, lim); mk == "" {
				kind = ""
			} else if ri == nil {
				why = fmt.Sprintf("it never held it, and no Mutex call of its Client on the name was in flight or ended in the %v before", lim.Recovery)
			}
		}
		if kind == "" {
			continue
		}
		k := kind + "\x00" + rn.Res + "\x00" + rn.Field
		if reports[k] == nil {
			reports[k] = &report{first: rn, why: why}
			order = append(order, k)
		}
		reports[k].n++
		reports[k].last = rn.T
	}
	var vs []Violation
	for _, k := range order {
		r := reports[k]
		check := VRenewal
		if k[:len(VStray)] == VStray {
			check = VStray
		}
		vs = append(vs, Violation{Check: check, At: r.first.T, Msg: fmt.Sprintf(
			"%s: %d renewal(s) of %s by %s, first %s, last %s: %s",
			r.first.Res, r.n, r.first.Field, r.first.Client, l.at(r.first.T), l.at(r.last), r.why)})
	}
	return vs
}

// doneOf is when a hold's last Unlock returned, or the end of the run.
func doneOf(l *Log, h *Hold) time.Time {
	if h.Done.IsZero() {
		return l.End
	}
	return h.Done
}

// judge classifies a renewal at t: "" when legitimate.
func (ri *renewIndex) judge(l *Log, t time.Time, lim Limits) (string, string) {
	for _, h := range ri.holds {
		if !h.Grant.After(t) && !t.After(doneOf(l, h).Add(lim.RenewSlack)) {
			return "", ""
		}
	}
	var lastEnd time.Time // latest end of an acquire call that returned before t
	var next *Call        // first acquire call started after the last Unlock
	for _, c := range ri.calls {
		end := c.End
		if !c.Returned() {
			end = l.End
		}
		if !c.Start.After(t) && !t.After(end) {
			return "", "" // an acquire in flight: the grant may precede the reply
		}
		if end.Before(t) {
			lastEnd = maxTime(lastEnd, end)
		}
	}
	// The latest hold whose Unlock returned before t.
	i := sort.Search(len(ri.holds), func(i int) bool { return !doneOf(l, ri.holds[i]).Before(t) })
	if i > 0 {
		h := ri.holds[i-1]
		for _, c := range ri.calls {
			end := c.End
			if !c.Returned() {
				end = l.End
			}
			// A call that began after the Unlock, or was still running
			// then: a relayed hold's field is also a MultiLock member's,
			// whose rounds go on around the relay.
			if c.Start.After(h.Done) || end.After(h.Done) {
				next = c
				break
			}
		}
		if next == nil || next.Start.After(t) {
			return VRenewal, fmt.Sprintf("its hold #%d [%s, %s] was released by Unlock calls that returned %v, the last at %s",
				h.ID, l.at(h.Grant), l.at(h.End), ri.unlocks[h.ID], l.at(h.Done))
		}
	}
	if lastEnd.IsZero() || t.Sub(lastEnd) > lim.Recovery {
		return VStray, fmt.Sprintf("no hold open and no acquire call in the %v before it", lim.Recovery)
	}
	return "", ""
}

// noDeadlineHang reports an Unlock or Release made without a deadline that
// took longer than lim.NoDeadline (or never returned): a caller with
// context.Background() must still get an answer.
func noDeadlineHang(l *Log, c *Call, lim Limits) []Violation {
	if c.Op != OpUnlock && c.Op != OpRelease {
		return nil
	}
	end, how := c.End, "returned"
	if !c.Returned() {
		end, how = l.End, "had not returned by the end of the run,"
	}
	if took := end.Sub(c.Start); took > lim.NoDeadline {
		return []Violation{{Check: VHang, At: c.Start.Add(lim.NoDeadline), Msg: fmt.Sprintf(
			"%v: %s %s (g%d, %s, owner %v) without a deadline started %s and %s %v later (-> %s %s)",
			c.Res, c.Prim, c.Op, c.G, c.Client, c.Owners, l.at(c.Start), how, took.Round(time.Millisecond), c.Out, c.Err)}}
	}
	return nil
}

// tinyLeaseMax bounds the tiny leases the workload asks for now and then:
// any positive lease is accepted, but one shorter than a round trip (under
// -race, on a loaded machine, a few milliseconds) can rarely be granted in
// time, so calls with one are not judged for liveness.
const tinyLeaseMax = 10 * time.Millisecond

// tinyLease reports a lease under tinyLeaseMax.
func tinyLease(d time.Duration) bool { return d > 0 && d < tinyLeaseMax }

// CheckGhostGrants reports grants whose owner's field was missing in Redis
// right after the caller got them: the library handed out a hold that had
// already ended (a reply that came back after the lease ran out). A probe
// is only judged when it came back soon after the grant (within a quarter
// of the lease), and is excused where something else may have ended the
// hold in between: a ForceUnlock of the name, a Lost before the probe, or a
// SIGSTOP or restart of its server (a key's TTL runs on while the server is
// stopped).
func CheckGhostGrants(l *Log) []Violation {
	var vs []Violation
	for i := range l.Holds {
		h := &l.Holds[i]
		if !h.ProbeGone || ghostExcused(l, h) {
			continue
		}
		lease := "watchdog"
		if h.Lease > 0 {
			lease = h.Lease.String()
		}
		if h.Relayed != "" {
			lease += ", relayed under field " + h.Relayed
		}
		vs = append(vs, Violation{Check: VGhost, At: h.Grant, Msg: fmt.Sprintf(
			"%s: %s hold (g%d, owner %s, lease %s) granted %s (call started %s), but its field was gone from Redis at %s",
			h.Res, h.Prim, h.G, h.Owner, lease, l.at(h.Grant), l.at(h.AcqStart), l.at(h.ProbeAt))})
	}
	return vs
}

func ghostExcused(l *Log, h *Hold) bool {
	lease := h.Lease
	if lease <= 0 {
		lease = watchdog
	}
	if h.ProbeAt.Sub(h.Grant) > lease/4 || (!h.Lost.IsZero() && h.Lost.Before(h.ProbeAt)) {
		return true
	}
	w := Interval{h.AcqStart, h.ProbeAt}
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Op == OpForceUnlock && len(c.Res) > 0 && c.Res[0] == h.Res && overlapsCall(c, w, l.End) {
			return true
		}
	}
	for _, f := range l.Faults {
		if (f.Kind == FaultPause || f.Kind == FaultRestart) && f.Server == serverOf(h.Res) && f.Start.Before(w.B) && f.End.After(w.A) {
			return true
		}
	}
	return false
}

// overlapsCall reports whether call c ran during w (a call that never
// returned runs to end).
func overlapsCall(c *Call, w Interval, end time.Time) bool {
	ce := c.End
	if ce.IsZero() {
		ce = end
	}
	return c.Start.Before(w.B) && ce.After(w.A)
}
