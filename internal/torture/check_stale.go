package torture

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// staleSlack is how late a caller's return may be recorded after the
// runtime answered it (the scheduler, under -race, on a loaded machine).
// The answers this check is for come back lateBy or more after their
// lease ran out.
const staleSlack = 50 * time.Millisecond

// CheckStaleGrants reports what a caller was handed after Redis had let it
// go: a grant that reached its caller after the lease its script set had
// run out, and an UpdateLease or Extend that returned nil after the new
// lease it set had run out. The hook saw when each such script had run at
// the latest (see LeaseRun), and so when its lease ran out in Redis at the
// latest. A grant comes from the last granting script of its owner that
// ran during its call (an earlier one may have been given back); a
// FaultLate window and the hook's late replies bring such grants back
// lateBy or more after their lease, unless a renewal of the field moved
// it on meanwhile. The runtime cannot know when Redis ran
// a script, but it knows when it sent it, which is earlier still: a grant
// whose reply comes back after its lease, counted from the send, is its to
// give back.
func CheckStaleGrants(l *Log) []Violation {
	runs := map[string][]*LeaseRun{} // by "<res>|<owner>", in the order seen
	for i := range l.Runs {
		r := &l.Runs[i]
		runs[r.Res+"|"+r.Owner] = append(runs[r.Res+"|"+r.Owner], r)
	}
	var vs []Violation
	for i := range l.Holds {
		h := &l.Holds[i]
		if h.Relayed != "" {
			vs = append(vs, staleRelay(l, h, runs[h.Res+"|"+h.Field()])...)
			continue
		}
		var last *LeaseRun // the script that granted the hold
		for _, r := range runs[h.Res+"|"+h.Field()] {
			if r.Grants && !r.T.Before(h.AcqStart) && !r.T.After(h.Grant) {
				last = r
			}
		}
		if last == nil {
			continue
		}
		// A grant can reach its caller well after its script (a Mutex's
		// waits for the previous holder's Unlock) while the watchdog keeps
		// renewing the field: each renewal that ran after the grant moved
		// the lease on.
		end := last.T.Add(last.Lease)
		for _, r := range runs[h.Res+"|"+h.Field()] {
			if !r.Grants && r.T.After(last.T) && !r.T.After(h.Grant) {
				end = maxTime(end, r.T.Add(r.Lease))
			}
		}
		if h.Grant.Sub(end) > staleSlack {
			vs = append(vs, Violation{Check: VStale, At: h.Grant, Msg: fmt.Sprintf(
				"%s: %s hold (g%d, owner %s) granted %s (call started %s) after its lease had run out in Redis: the %s script that granted its %v lease had run by %s",
				h.Res, h.Prim, h.G, h.Owner, l.at(h.Grant), l.at(h.AcqStart), last.Script, last.Lease, l.at(last.T))})
		}
	}
	for i := range l.Calls {
		c := &l.Calls[i]
		if (c.Op != OpUpdateLease && c.Op != OpExtend) || c.Out != OutOK || len(c.Res) != 1 || len(c.Owners) != 1 {
			continue
		}
		for _, r := range runs[c.Res[0]+"|"+c.Owners[0]] {
			if (r.Script != "permit_update" && r.Script != "renew") || r.Lease != c.Lease || r.T.Before(c.Start) || r.T.After(c.End) {
				continue
			}
			if end := r.T.Add(r.Lease); c.End.Sub(end) > staleSlack {
				vs = append(vs, Violation{Check: VStale, At: c.End, Msg: fmt.Sprintf(
					"%s: %s %s (g%d, %s, owner %s) [%s, %s] returned nil after the new lease of %v had run out in Redis: its %s script had run by %s",
					c.Res[0], c.Prim, c.Op, c.G, c.Client, c.Owners[0], l.at(c.Start), l.at(c.End), c.Lease, r.Script, l.at(r.T))})
				break
			}
		}
	}
	return vs
}

// staleRelay reports a relayed hold handed to its caller after the hold
// it was relayed from had surely run out in Redis: after the lease of the
// last script that set its field's lease (a grant or a renewal) before
// the relay, counted from when the script had run at the latest.
func staleRelay(l *Log, h *Hold, runs []*LeaseRun) []Violation {
	var last *LeaseRun
	for _, r := range runs {
		if !r.T.After(h.Grant) && (last == nil || r.T.After(last.T)) {
			last = r
		}
	}
	if last == nil {
		return []Violation{{Check: VStale, At: h.Grant, Msg: fmt.Sprintf(
			"%s: %s hold (g%d, owner %s) relayed under %s at %s, a field no script had set",
			h.Res, h.Prim, h.G, h.Owner, h.Field(), l.at(h.Grant))}}
	}
	if end := last.T.Add(last.Lease); h.Grant.Sub(end) > staleSlack {
		return []Violation{{Check: VStale, At: h.Grant, Msg: fmt.Sprintf(
			"%s: %s hold (g%d, owner %s) relayed under %s at %s, after its lease had run out in Redis: the %s script that set its %v lease had run by %s",
			h.Res, h.Prim, h.G, h.Owner, h.Field(), l.at(h.Grant), last.Script, last.Lease, l.at(last.T))}}
	}
	return nil
}

// burstMargin: of two waiters of a fair burst, the one whose call began this
// much earlier asked first (the waiters ask burstGap, 10ms or more, apart).
const burstMargin = 5 * time.Millisecond

// CheckFairBursts reports one Client's FairLock waiters granted out of the
// order they asked, on the names of the fair bursts (see fairBurstStep):
// of two Lock calls on such a name, both granted, the one that began
// burstMargin or more before the other must have been granted first. Each
// name belongs to one worker, so only its Client's own order decides; a
// restart, or a topology fault (a failover, a replica stopped: a grant too
// few replicas confirmed is given back and queues again), during the
// earlier call excuses the pair.
func CheckFairBursts(l *Log) []Violation {
	byRes := map[string][]*Call{}
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Prim == PrimFair && c.Op == OpLock && c.Lease == 0 && c.Out == OutOK && len(c.Res) == 1 && burstRes(c.Res[0]) {
			byRes[c.Res[0]] = append(byRes[c.Res[0]], c)
		}
	}
	var vs []Violation
	for _, res := range sortedKeys(byRes) {
		cs := byRes[res]
		slices.SortFunc(cs, func(a, b *Call) int { return a.Start.Compare(b.Start) })
		for i, x := range cs {
			if burstExcused(l, x) {
				continue
			}
			for _, y := range cs[i+1:] {
				if y.Start.Sub(x.Start) >= burstMargin && y.End.Before(x.End) {
					vs = append(vs, Violation{Check: VFairOrder, At: y.End, Msg: fmt.Sprintf(
						"%s: Lock (g%d, %s, owner %v) began %s and was granted %s, after Lock (owner %v), which began %s, later, was granted %s",
						res, x.G, x.Client, x.Owners, l.at(x.Start), l.at(x.End), y.Owners, l.at(y.Start), l.at(y.End))})
					break
				}
			}
		}
	}
	return vs
}

// burstRes reports whether res is a fair burst's name.
func burstRes(res string) bool { return strings.Contains(res, "/fairb") }

// burstExcused reports whether a fault during c may have reordered the
// fair queue: a restart of its server, or any topology fault.
func burstExcused(l *Log, c *Call) bool {
	if restartDuring(l, c.Res[0], Interval{c.Start, c.End}) {
		return true
	}
	for _, f := range l.Faults {
		if f.Kind >= FaultFailover && f.Start.Before(c.End) && f.End.After(c.Start) {
			return true
		}
	}
	return false
}
