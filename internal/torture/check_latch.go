package torture

import (
	"fmt"
	"slices"
	"time"
)

// CheckLatches judges the CountDownLatch rounds (see latchStep: each name is
// set by TrySetCount(n), awaited and counted down; some are set again, with
// a count of 1, as soon as they reached zero, and awaited once more):
//
//   - The first TrySetCount on a name nobody used before must return true.
//   - An Await may return nil only if the count could have been zero at some
//     moment of its call. After a TrySetCount(n) that returned true, the
//     count is surely not zero until n CountDown calls that may count it
//     have started (any outcome counts, since a call whose reply was lost
//     may have counted; a call that returned OK before that TrySetCount
//     began cannot count it, but one that ended by its ctx or a Redis error
//     can: its CountDown may still be queued in its Client, or in flight,
//     and be applied later). An Await inside that stretch, start to return, was
//     let go early (or a CountDown counted twice). A restart of the server,
//     or an Unsafe window of rx, between the TrySetCount and the Await's
//     return excuses it: Redis may have forgotten the count, and an absent
//     count lets every awaiter go.
//   - Once n CountDowns of a count have returned OK, the count is surely
//     zero until the name's next TrySetCount begins: no Await may go on
//     waiting for more than lim.LiveGap of that stretch outside the fault
//     windows (each extended by lim.Recovery).
func CheckLatches(l *Log, lim Limits, rx Relaxations) []Violation {
	type round struct {
		sets   []*Call
		downs  []*Call
		awaits []*Call
	}
	rounds := map[string]*round{}
	faults := faultWindows(l, lim)
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Prim != PrimLatch || len(c.Res) != 1 {
			continue
		}
		r := rounds[c.Res[0]]
		if r == nil {
			r = &round{}
			rounds[c.Res[0]] = r
		}
		switch c.Op {
		case OpSetCount:
			r.sets = append(r.sets, c)
		case OpCountDown:
			r.downs = append(r.downs, c)
		case OpAwait:
			r.awaits = append(r.awaits, c)
		}
	}
	var vs []Violation
	for _, res := range sortedKeys(rounds) {
		r := rounds[res]
		if len(r.sets) == 0 {
			continue
		}
		slices.SortFunc(r.sets, func(a, b *Call) int { return a.Start.Compare(b.Start) })
		if first := r.sets[0]; first.Out == OutNo {
			vs = append(vs, Violation{Check: VLatch, At: first.End, Msg: fmt.Sprintf(
				"%s: TrySetCount(%d) (g%d, %s) of a fresh name returned false", res, first.N, first.G, first.Client)})
		}
		for k, set := range r.sets {
			if set.Out != OutOK {
				continue
			}
			var next *Call // the name's next TrySetCount
			if k+1 < len(r.sets) {
				next = r.sets[k+1]
			}
			vs = append(vs, latchEarly(l, rx, res, set, r.downs, r.awaits)...)
			vs = append(vs, latchLate(l, lim, faults, res, set, next, r.downs, r.awaits)...)
		}
	}
	return vs
}

// latchEarly reports the Awaits that returned nil while set's count was
// surely not zero (see CheckLatches).
func latchEarly(l *Log, rx Relaxations, res string, set *Call, downs, awaits []*Call) []Violation {
	var starts []time.Time // of the CountDowns that may count set's count
	for _, d := range downs {
		if !d.Returned() || d.End.After(set.Start) || d.Out.Ambiguous() {
			starts = append(starts, d.Start)
		}
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	var vs []Violation
	for _, a := range awaits {
		if a.Out != OutOK || a.Start.Before(set.End) {
			continue
		}
		started := 0
		for _, t := range starts {
			if t.Before(a.End) {
				started++
			}
		}
		if started < set.N && !forgotten(l, rx, res, Interval{set.Start, a.End}) {
			vs = append(vs, Violation{Check: VLatch, At: a.End, Msg: fmt.Sprintf(
				"%s: Await (g%d, %s) [%s, %s] returned while the count of %d set at %s could not be zero: %d CountDown calls that may count it had started",
				res, a.G, a.Client, l.at(a.Start), l.at(a.End), set.N, l.at(set.End), started)})
		}
	}
	return vs
}

// latchLate reports the Awaits that went on waiting while set's count was
// surely zero (see CheckLatches); next is the name's next TrySetCount, or
// nil.
func latchLate(l *Log, lim Limits, faults []Interval, res string, set, next *Call, downs, awaits []*Call) []Violation {
	var ends []time.Time // of the OK CountDowns that surely counted set's count
	for _, d := range downs {
		if d.Out == OutOK && !d.Start.Before(set.End) && (next == nil || d.End.Before(next.Start)) {
			ends = append(ends, d.End)
		}
	}
	if len(ends) < set.N {
		return nil
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	zero := ends[set.N-1] // from then on the count is surely zero...
	until := l.End        // ...until the next TrySetCount may set it again
	if next != nil {
		until = next.Start
	}
	var vs []Violation
	for _, a := range awaits {
		w := Interval{maxTime(zero, a.Start), minTime(a.End, until)}
		if !a.Returned() {
			w.B = until
		} else if a.Out == OutCtx {
			w.B = minTime(w.B, a.CtxEnd)
		}
		if !w.B.After(w.A) {
			continue
		}
		if gap := longestGap(w, pick(faults, w)); gap.Len() > lim.LiveGap {
			vs = append(vs, Violation{Check: VLiveness, At: gap.A, Msg: fmt.Sprintf(
				"%s: Await (g%d, %s) [%s, %s] -> %s went on waiting %v [%s, %s] after the count reached zero (%d CountDowns OK by %s)",
				res, a.G, a.Client, l.at(a.Start), l.at(a.End), a.Out, gap.Len().Round(time.Millisecond),
				l.at(gap.A), l.at(gap.B), set.N, l.at(zero))})
		}
	}
	return vs
}

// restartDuring reports whether res's server restarted (and so forgot it)
// during w, counting restartMargin after the restart as during (a reply of
// the old server may still be on its way).
func restartDuring(l *Log, res string, w Interval) bool {
	for _, f := range l.Faults {
		if f.Kind == FaultRestart && f.Server == serverOf(res) && f.Start.Before(w.B) && f.End.Add(restartMargin).After(w.A) {
			return true
		}
	}
	return false
}

// forgotten reports whether the deployment may have lost res's writes
// during w: a restart of its server, or an Unsafe window of rx.
func forgotten(l *Log, rx Relaxations, res string, w Interval) bool {
	if restartDuring(l, res, w) {
		return true
	}
	for _, u := range rx.Unsafe {
		if u.covers(res) && u.A.Before(w.B) && u.B.After(w.A) {
			return true
		}
	}
	return false
}
