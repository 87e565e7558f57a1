package torture

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// CheckLiveness reports waiting calls (Lock, TryLock with a wait, Acquire,
// TryAcquire with a wait) that went on waiting for more than lim.LiveGap
// while what they waited for was available, outside every excused stretch.
//
// Available means: for an exclusive call, no live span of the name (any
// owner) open; for a read, no write span open and no older writer of the
// same Client waiting (it queues behind it); for a MultiLock, both names
// free; for a semaphore, at least the call's n permits free (counting
// permits whose acquire or release was ambiguous as still taken), the
// semaphore initialised, and no older waiting call of the same Client on it
// (the Client's local FIFO serves that one first).
//
// Excused: every fault window extended by lim.Recovery (restarts included);
// and on the name, every call that returned a Redis error, plus every
// Unlock, Release or ForceUnlock that returned any error, from its start to
// lim.Recovery after it returned (the release may still be pending, or a
// lost reply left a hold behind that only its lease will end).
//
// A call's own holds are not excluded from "busy": a waiting call by an
// owner that already holds is a reentrant grant and returns at once.
func CheckLiveness(l *Log, spans []Span, lim Limits) []Violation {
	lv := newLiveIndex(l, spans, lim)
	var vs []Violation
	for i := range l.Calls {
		c := &l.Calls[i]
		if !c.Waiting || len(c.Res) == 0 {
			continue
		}
		w := Interval{c.Start, c.End}
		if !c.Returned() {
			w.B = l.End
		}
		if w.Len() <= lim.LiveGap {
			continue
		}
		covered := pick(lv.global, w)
		for _, r := range c.Res {
			covered = append(covered, pick(lv.excused[r], w)...)
			switch c.Prim {
			case PrimSem, PrimPermit:
				covered = append(covered, lv.semBusy(r, c.N, w)...)
				covered = append(covered, lv.fifo(c, w)...)
			case PrimRead:
				covered = append(covered, pick(lv.writes[r], w)...)
				covered = append(covered, lv.fifo(c, w)...)
			default:
				covered = append(covered, pick(lv.any[r], w)...)
			}
		}
		gap := longestGap(w, union(covered))
		if gap.Len() <= lim.LiveGap {
			continue
		}
		vs = append(vs, Violation{Check: VLiveness, At: gap.A, Msg: fmt.Sprintf(
			"%v: %s %s (g%d, %s, owner %v, call [%s, %s] -> %s) waited %v [%s, %s] while it was available%s",
			c.Res, c.Prim, c.Op, c.G, c.Client, c.Owners, l.at(c.Start), l.at(c.End), c.Out,
			gap.Len().Round(time.Millisecond), l.at(gap.A), l.at(gap.B), lv.before(c.Res, gap.A)+lv.renewedIn(c.Res, gap))})
	}
	return vs
}

// liveIndex holds the sorted, merged intervals liveness looks up per call.
type liveIndex struct {
	l       *Log
	lim     Limits
	global  []Interval            // fault windows + recovery
	excused map[string][]Interval // per resource: errored calls + recovery
	any     map[string][]Interval // per resource: some hold open
	writes  map[string][]Interval // per resource: some exclusive hold open
	spans   map[string][]Span     // per resource, for messages
	sem     map[string][]semEdge  // per semaphore: permits taken or possibly taken
	exists  map[string][]Interval // per semaphore: initialised
	waiting map[string][]*Call    // per name and Client: waiting acquirers and writers, by start
	busyFor map[string][]Interval // cache of semBusy by resource and n
	renews  map[string][]Renewal  // per resource, by time: who kept a hold alive
}

type semEdge struct {
	t     time.Time
	delta int
}

func newLiveIndex(l *Log, spans []Span, lim Limits) *liveIndex {
	lv := &liveIndex{l: l, lim: lim, excused: map[string][]Interval{}, any: map[string][]Interval{},
		writes: map[string][]Interval{}, spans: map[string][]Span{}, sem: map[string][]semEdge{},
		exists: map[string][]Interval{}, waiting: map[string][]*Call{}, busyFor: map[string][]Interval{}}
	lv.global = faultWindows(l, lim)
	for _, s := range spans {
		r := s.H.Res
		lv.spans[r] = append(lv.spans[r], s)
		if s.H.Prim == PrimPermit {
			lv.addPermits(r, s.Interval, 1)
			// A permit whose Release failed goes back when its lease
			// ends, whatever happened to the Release.
			if s.H.DoneOut.Ambiguous() {
				lv.addPermits(r, Interval{s.B, minTime(s.H.LeaseLate, lv.untilRestart(r, s.B))}, 1)
			}
			continue
		}
		if s.H.Prim == PrimSem {
			lv.addPermits(r, s.Interval, s.H.N)
			// A Release that failed may not have given the permits back: a
			// refused one never will (Redis errors), a timed-out one may
			// still (ctx).
			switch s.H.DoneOut {
			case OutRedis, OutNoQuorum:
				lv.addPermits(r, Interval{s.B, lv.untilRestart(r, s.B)}, s.H.N)
			case OutCtx:
				lv.addPermits(r, Interval{s.B, minTime(s.B.Add(lim.Recovery), lv.untilRestart(r, s.B))}, s.H.N)
			}
			continue
		}
		lv.any[r] = append(lv.any[r], s.Interval)
		if s.H.Prim.Exclusive() {
			lv.writes[r] = append(lv.writes[r], s.Interval)
		}
	}
	for i := range l.Calls {
		c := &l.Calls[i]
		end := c.End
		if !c.Returned() {
			end = l.End
		}
		// (A permit's Release or UpdateLease answered ErrNotHeld changed
		// nothing: its lease had ended.)
		bad := c.Out == OutRedis || c.Out == OutNoQuorum ||
			(!c.Op.acquires() && c.Out != OutOK && c.Out != OutNo && c.Op != OpSetPermits &&
				!(c.Prim == PrimPermit && c.Out == OutNotHeld))
		for _, r := range c.Res {
			if bad {
				lv.excused[r] = append(lv.excused[r], Interval{c.Start, end.Add(lim.Recovery)})
			}
			if !c.Prim.Counted() {
				continue
			}
			switch {
			case c.Prim == PrimPermit && c.Op.acquires() && c.Out.Ambiguous():
				// A permit taken with its reply lost (or as the context
				// ended) comes back when its lease ends.
				lv.addPermits(r, Interval{end, minTime(end.Add(c.Lease), lv.untilRestart(r, end))}, 1)
			case c.Op == OpSetPermits && (c.Out == OutOK || c.Out == OutNo):
				lv.exists[r] = append(lv.exists[r], Interval{end, lv.untilRestart(r, end)})
			case c.Op.acquires() && (c.Out == OutRedis || c.Out == OutNoQuorum):
				// The permits may have been taken with the reply lost, and
				// then nobody gives them back. (From the call's end: before
				// it, the call itself is the one waiting.)
				lv.addPermits(r, Interval{end, lv.untilRestart(r, end)}, c.N)
			case c.Op.acquires() && c.Out == OutCtx:
				// Taken as the context ended: given back, but after the call.
				lv.addPermits(r, Interval{end, end.Add(lim.Recovery)}, c.N)
			}
		}
		if c.Waiting && (c.Prim.Counted() || c.Prim == PrimWrite) && len(c.Res) == 1 {
			k := c.Res[0] + "\x00" + c.Client
			lv.waiting[k] = append(lv.waiting[k], c)
		}
	}
	for _, cs := range lv.waiting {
		slices.SortFunc(cs, func(a, b *Call) int { return a.Start.Compare(b.Start) })
	}
	for _, m := range []map[string][]Interval{lv.excused, lv.any, lv.writes, lv.exists} {
		for r, ivs := range m {
			m[r] = union(ivs)
		}
	}
	lv.renews = map[string][]Renewal{}
	for _, rn := range l.Renewals {
		lv.renews[rn.Res] = append(lv.renews[rn.Res], rn)
	}
	for _, rs := range lv.renews {
		slices.SortFunc(rs, func(a, b Renewal) int { return a.T.Compare(b.T) })
	}
	for _, ss := range lv.spans {
		slices.SortFunc(ss, func(a, b Span) int { return a.B.Compare(b.B) })
	}
	return lv
}

// faultWindows is every fault's window (not the semaphore generations)
// extended by lim.Recovery, merged: where liveness is not judged.
func faultWindows(l *Log, lim Limits) []Interval {
	var ws []Interval
	for _, f := range l.Faults {
		if f.Kind != SemGen {
			ws = append(ws, Interval{f.Start, f.End.Add(lim.Recovery)})
		}
	}
	return union(ws)
}

func (lv *liveIndex) addPermits(r string, iv Interval, n int) {
	if !iv.Empty() {
		lv.sem[r] = append(lv.sem[r], semEdge{iv.A, n}, semEdge{iv.B, -n})
	}
}

// untilRestart is the first restart of r's server after t (the end of the
// run if none): Redis forgets a semaphore's count there.
func (lv *liveIndex) untilRestart(r string, t time.Time) time.Time {
	end := lv.l.End
	for _, f := range lv.l.Faults {
		if f.Kind == FaultRestart && f.Server == serverOf(r) && f.Start.After(t) {
			end = minTime(end, f.Start)
		}
	}
	return end
}

// semBusy is where semaphore r cannot serve n permits: uninitialised, or
// more than Permits-n taken or possibly taken.
func (lv *liveIndex) semBusy(r string, n int, w Interval) []Interval {
	key := fmt.Sprint(r, "\x00", n)
	busy, ok := lv.busyFor[key]
	if !ok {
		es := slices.Clone(lv.sem[r])
		slices.SortFunc(es, func(a, b semEdge) int {
			if c := a.t.Compare(b.t); c != 0 {
				return c
			}
			return a.delta - b.delta
		})
		held := 0
		var from time.Time
		for _, e := range es {
			before := held
			held += e.delta
			if before <= lv.lim.Permits-n && held > lv.lim.Permits-n {
				from = e.t
			} else if before > lv.lim.Permits-n && held <= lv.lim.Permits-n {
				busy = append(busy, Interval{from, e.t})
			}
		}
		if held > lv.lim.Permits-n {
			busy = append(busy, Interval{from, lv.l.End})
		}
		// Outside the initialised stretches nothing is available.
		cur := lv.l.Start
		for _, e := range lv.exists[r] {
			busy = append(busy, Interval{cur, e.A})
			cur = maxTime(cur, e.B)
		}
		busy = append(busy, Interval{cur, lv.l.End.Add(time.Hour)})
		busy = union(busy)
		lv.busyFor[key] = busy
	}
	return pick(busy, w)
}

// fifo is where an older waiting call of the same Client on the same name
// that the local queue serves first was still waiting: any older acquirer of
// a semaphore; an older writer for a reader of a read-write lock (readers
// queue behind a Client's waiting writer rather than overtake it, so a
// writer starved by other Clients' readers holds its Client's readers back
// too; that is the library's queueing rule, not a lost wake-up).
func (lv *liveIndex) fifo(c *Call, w Interval) []Interval {
	var out []Interval
	for _, o := range lv.waiting[c.Res[0]+"\x00"+c.Client] {
		if !o.Start.Before(c.Start) {
			break
		}
		end := o.End
		if !o.Returned() {
			end = lv.l.End
		}
		if iv := (Interval{o.Start, end}).clip(w); !iv.Empty() {
			out = append(out, iv)
		}
	}
	return out
}

// before describes the last span on res that ended at or before t, as
// context for a liveness message.
func (lv *liveIndex) before(res []string, t time.Time) string {
	var last *Span
	for _, r := range res {
		ss := lv.spans[r]
		i := sort.Search(len(ss), func(i int) bool { return ss[i].B.After(t) })
		if i > 0 && (last == nil || ss[i-1].B.After(last.B)) {
			last = &ss[i-1]
		}
	}
	if last == nil {
		return "; no hold before it"
	}
	return "; last hold before it: " + lv.l.describe(*last)
}

// renewedIn names the owners whose holds of res the watchdog renewed during
// gap: a hold Redis keeps that no caller holds is the usual reason a free
// lock stays taken.
func (lv *liveIndex) renewedIn(res []string, gap Interval) string {
	var who []string
	for _, r := range res {
		rs := lv.renews[r]
		i := sort.Search(len(rs), func(i int) bool { return !rs[i].T.Before(gap.A) })
		for ; i < len(rs) && rs[i].T.Before(gap.B); i++ {
			if w := r + " " + rs[i].Field; !slices.Contains(who, w) {
				who = append(who, w)
			}
		}
	}
	if len(who) == 0 {
		return ""
	}
	return fmt.Sprintf("; renewed during the gap: %v", who)
}

// pick returns the intervals of sorted, merged ivs that intersect w.
func pick(ivs []Interval, w Interval) []Interval {
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i].B.After(w.A) })
	j := i
	for j < len(ivs) && ivs[j].A.Before(w.B) {
		j++
	}
	return slices.Clone(ivs[i:j])
}
