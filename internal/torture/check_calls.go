package torture

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// CheckHangs reports calls that returned more than lim.HangSlack after their
// context ended (or never returned).
func CheckHangs(l *Log, lim Limits) []Violation {
	var vs []Violation
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.CtxEnd.IsZero() {
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
			if c.Op != OpUnlock || notHeldExplained(l, c, spanOf) {
				continue
			}
			var desc []string
			for _, id := range c.Holds {
				if s, ok := spanOf[id]; ok {
					desc = append(desc, l.describe(s))
				}
			}
			vs = append(vs, Violation{Check: VErrors, At: c.End, Msg: fmt.Sprintf(
				"%v: %s Unlock (g%d, %s, owner %v) [%s, %s] returned ErrNotHeld, but no Lost, lease, ForceUnlock, restart or earlier ambiguous call explains it: %v",
				c.Res, c.Prim, c.G, c.Client, c.Owners, l.at(c.Start), l.at(c.End), desc)})
		}
	}
	return vs
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
		for j := range l.Calls {
			o := &l.Calls[j]
			if o.Op == OpForceUnlock && len(o.Res) > 0 && o.Res[0] == h.Res && o.Start.Before(c.End) && (o.End.IsZero() || o.End.After(h.AcqStart)) {
				return true
			}
		}
		for _, f := range l.Faults {
			if f.Kind == FaultRestart && f.Server == serverOf(h.Res) && f.Start.Before(c.End) && f.End.Add(restartMargin).After(h.AcqStart) {
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
		if h.Prim != PrimSem {
			ri := get(h.Res, h.Field())
			ri.holds = append(ri.holds, h)
		}
	}
	unlocks := map[int][]Outcome{} // what each hold's Unlock calls returned
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Op == OpUnlock {
			for _, id := range c.Holds {
				unlocks[id] = append(unlocks[id], c.Out)
			}
		}
		if c.Op.acquires() && c.Prim != PrimSem {
			for j, r := range c.Res {
				ri := get(r, c.field(j))
				ri.calls = append(ri.calls, c)
			}
		}
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
			if c.Start.After(h.Done) {
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
