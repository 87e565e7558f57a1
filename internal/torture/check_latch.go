package torture

import (
	"fmt"
	"slices"
	"time"
)

// CheckLatches judges the CountDownLatch rounds (see latchStep: each name is
// set once, by TrySetCount(n), then awaited and counted down):
//
//   - TrySetCount on a name nobody used before must return true.
//   - An Await may return nil only once the count could have reached zero:
//     by its return, at least n CountDown calls on the name must have
//     started. Any outcome counts, since a call whose reply was lost may
//     have counted; fewer means a CountDown counted twice or an awaiter was
//     let go early. A restart of the server, or an Unsafe window of rx,
//     between the TrySetCount and the Await's return excuses it: Redis may
//     have forgotten the count, and an absent count lets every awaiter go.
//   - Once n CountDowns have returned OK (from then on the count is surely
//     zero), no Await may go on waiting for more than lim.LiveGap outside
//     the fault windows (each extended by lim.Recovery).
func CheckLatches(l *Log, lim Limits, rx Relaxations) []Violation {
	type round struct {
		set    *Call
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
			r.set = c
		case OpCountDown:
			r.downs = append(r.downs, c)
		case OpAwait:
			r.awaits = append(r.awaits, c)
		}
	}
	var vs []Violation
	for _, res := range sortedKeys(rounds) {
		r := rounds[res]
		if r.set == nil {
			continue
		}
		if r.set.Out == OutNo {
			vs = append(vs, Violation{Check: VLatch, At: r.set.End, Msg: fmt.Sprintf(
				"%s: TrySetCount(%d) (g%d, %s) of a fresh name returned false", res, r.set.N, r.set.G, r.set.Client)})
		}
		if r.set.Out != OutOK {
			continue
		}
		slices.SortFunc(r.downs, func(a, b *Call) int { return a.Start.Compare(b.Start) })
		zero := time.Time{} // when the n-th OK CountDown returned
		oks := 0
		for _, d := range r.downs {
			if d.Out == OutOK {
				if oks++; oks == r.set.N {
					zero = d.End
				}
			}
		}
		for _, a := range r.awaits {
			if a.Out == OutOK {
				started := 0
				for _, d := range r.downs {
					if d.Start.Before(a.End) {
						started++
					}
				}
				if started < r.set.N && !forgotten(l, rx, res, Interval{r.set.Start, a.End}) {
					vs = append(vs, Violation{Check: VLatch, At: a.End, Msg: fmt.Sprintf(
						"%s: Await (g%d, %s) [%s, %s] returned while the count of %d could not be zero: %d CountDown calls had started",
						res, a.G, a.Client, l.at(a.Start), l.at(a.End), r.set.N, started)})
				}
			}
			if zero.IsZero() {
				continue
			}
			w := Interval{maxTime(zero, a.Start), a.End}
			if !a.Returned() {
				w.B = l.End
			} else if a.Out == OutCtx {
				w.B = minTime(w.B, a.CtxEnd)
			}
			if gap := longestGap(w, pick(faults, w)); gap.Len() > lim.LiveGap {
				vs = append(vs, Violation{Check: VLiveness, At: gap.A, Msg: fmt.Sprintf(
					"%s: Await (g%d, %s) [%s, %s] -> %s went on waiting %v [%s, %s] after the count reached zero (%d CountDowns OK by %s)",
					res, a.G, a.Client, l.at(a.Start), l.at(a.End), a.Out, gap.Len().Round(time.Millisecond),
					l.at(gap.A), l.at(gap.B), r.set.N, l.at(zero))})
			}
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
