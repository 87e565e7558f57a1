package torture

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// VReplica names the replica-sync check's violations.
const VReplica = "replica-sync"

// Window is a stretch of a topology run during which some resources (In;
// nil: every one) were at risk, and why.
type Window struct {
	Interval
	Why string
	In  func(res string) bool
}

func (w Window) covers(res string) bool { return w.In == nil || w.In(res) }

// ReplicaProbe is one read of a fresh grant's field on the replica.
type ReplicaProbe struct {
	Hold     int       // the hold's ID
	At       time.Time // when the read was sent
	Back     time.Time // when its answer came back: the read ran no later
	Answered bool      // false: the replica did not answer in time (no judgement)
	Gone     bool      // the replica answered that the field is missing
}

// Relaxations are what a topology run's faults allow beyond a single
// server's, and the replica probes. The checks that stay strict in every
// variant: no caller left unanswered (hangs, no-deadline Unlocks), no call
// returning an error it may not, renewals only of holds, fencing tokens
// (across Clients, over the whole run), liveness outside fault windows, and every check outside
// Unsafe windows.
type Relaxations struct {
	// Unsafe windows are where the deployment may lose writes it had
	// acknowledged: a master killed before its replica got the latest
	// writes, a Sentinel switch (writes that reached the old master after
	// the promotion are discarded when it resyncs; renewals that landed
	// there still extended the hold locally).
	// A hold open when one starts is cut there (its owner may not know it
	// lost the lock), and a hold whose grant may have been written inside
	// one is left out of mutual exclusion and the permit bound. Fencing
	// tokens are not relaxed: they follow the server's clock, and are
	// compared over the whole run (CheckFencingTokens).
	// Renewals seen inside one are not judged either: while the master is
	// unreachable a Client's queue of scripts for it waits, and renewals
	// queued before an Unlock go out after the Unlock returned (an error),
	// still ahead of the release in redisio's per-name order.
	Unsafe []Window
	// Frozen windows are where a fresh grant may be missing from a read
	// right after it for a reason that is not the runtime's: a stopped
	// server (TTLs run on), a replica resynchronising from empty. Ghost and
	// replica probes overlapping one are not judged.
	Frozen []Window
	// Probes are the replica-sync variant's reads of every fresh grant.
	Probes []ReplicaProbe
}

// CheckTopology runs every check over the log, relaxed as rx says (see
// Relaxations), plus CheckReplicaGrants of rx's probes, and returns the
// violations in time order. Check is it with nothing relaxed.
func CheckTopology(l *Log, lim Limits, rx Relaxations) []Violation {
	safe, live := rx.Cut(SafeSpans(l)), LiveSpans(l)
	var vs []Violation
	vs = append(vs, CheckMutualExclusion(l, safe, lim)...)
	vs = append(vs, CheckSemaphoreBound(l, safe, lim)...)
	vs = append(vs, CheckFencingTokens(l, SafeSpans(l))...) // tokens follow the clock: no relaxing
	vs = append(vs, CheckClientTokens(l)...)
	vs = append(vs, CheckHangs(l, lim)...)
	vs = append(vs, CheckLiveness(l, live, lim)...)
	vs = append(vs, CheckRenewals(rx.unjudgedRenewals(l), lim)...)
	vs = append(vs, CheckCallErrors(rx.unjudgedUpgrades(l), safe)...)
	vs = append(vs, CheckGhostGrants(rx.unjudged(l))...)
	vs = append(vs, CheckLateLost(rx.unjudgedLost(l))...)
	vs = append(vs, CheckReplicaGrants(l, rx)...)
	vs = append(vs, CheckLatches(l, lim, rx)...)
	vs = append(vs, CheckStaleGrants(l)...)
	vs = append(vs, CheckFairBursts(l)...)
	vs = append(vs, CheckOutageNamed(l)...)
	slices.SortStableFunc(vs, func(a, b Violation) int { return a.At.Compare(b.At) })
	return vs
}

// Cut applies the Unsafe windows to safe spans: a span whose grant call
// overlaps a window of its resource becomes empty, and one open at a
// window's start ends there; both end "by restart" (the deployment may
// have forgotten them). Cutting only ever hides overlaps.
func (rx Relaxations) Cut(spans []Span) []Span {
	out := slices.Clone(spans)
	for i := range out {
		s := &out[i]
		for _, w := range rx.Unsafe {
			switch {
			case !w.covers(s.H.Res):
			case granted(s.H, w.Interval):
				s.B, s.By = s.A, ByRestart
			case s.A.Before(w.A) && s.B.After(w.A):
				s.B, s.By = w.A, ByRestart
			}
		}
	}
	return out
}

// granted reports whether h's grant may have been written during w.
func granted(h *Hold, w Interval) bool { return h.AcqStart.Before(w.B) && h.Grant.After(w.A) }

// unjudged is l with the ghost probes of holds whose grant-to-probe stretch
// overlaps a Frozen or Unsafe window of their resource marked as not gone.
func (rx Relaxations) unjudged(l *Log) *Log {
	c := *l
	c.Holds = slices.Clone(l.Holds)
	for i := range c.Holds {
		h := &c.Holds[i]
		if h.ProbeGone && rx.excused(h, h.ProbeAt) {
			h.ProbeGone = false
		}
	}
	return &c
}

// unjudgedLost is l with the late-Lost marks cleared on holds whose life,
// from the grant call to the end of their Unlock, met an Unsafe window of
// their resource: a lossy failover may drop the hold on the new master
// whatever its Unlock said.
func (rx Relaxations) unjudgedLost(l *Log) *Log {
	c := *l
	c.Holds = slices.Clone(l.Holds)
	for i := range c.Holds {
		h := &c.Holds[i]
		if !h.LostLate {
			continue
		}
		end := h.Done
		if end.IsZero() {
			end = h.End
		}
		for _, w := range rx.Unsafe {
			if w.covers(h.Res) && w.A.Before(end) && w.B.After(h.AcqStart) {
				h.LostLate = false
				break
			}
		}
	}
	return &c
}

// excused reports whether a probe at t of h falls where no judgement is
// possible.
func (rx Relaxations) excused(h *Hold, t time.Time) bool {
	w := Interval{h.AcqStart, t}
	for _, ws := range [][]Window{rx.Frozen, rx.Unsafe} {
		for _, f := range ws {
			if f.covers(h.Res) && f.A.Before(w.B) && f.B.After(w.A) {
				return true
			}
		}
	}
	return false
}

// CheckReplicaGrants reports grants the runtime handed out (WithReplicaSync
// requiring the replica's confirmation) whose field the replica did not
// have when read right after, on its own connection, while the owner still
// held it. Excused, as for ghost grants: a read more than a quarter of the
// lease after the grant, a Lost before the read, a ForceUnlock of the name,
// a Frozen or Unsafe window overlapping the grant and the read, a fixed
// lease whose Lost closed by the answer (leaseMayHaveEnded); and a hold
// the master itself lacked (a ghost grant, reported by that check).
func CheckReplicaGrants(l *Log, rx Relaxations) []Violation {
	holds := map[int]*Hold{}
	for i := range l.Holds {
		holds[l.Holds[i].ID] = &l.Holds[i]
	}
	var vs []Violation
	for _, p := range rx.Probes {
		h := holds[p.Hold]
		if !p.Gone || h == nil || h.ProbeGone || rx.excused(h, p.At) {
			continue
		}
		probe := *h
		probe.ProbeAt = maxTime(p.At, p.Back) // the read ran by the answer
		if ghostExcused(l, &probe) || leaseMayHaveEnded(h, probe.ProbeAt) {
			continue
		}
		vs = append(vs, Violation{Check: VReplica, At: h.Grant, Msg: fmt.Sprintf(
			"%s: %s hold (g%d, owner %s) granted %s (call started %s), but the replica lacked its field at %s",
			h.Res, h.Prim, h.G, h.Owner, l.at(h.Grant), l.at(h.AcqStart), l.at(p.At))})
	}
	return vs
}

// leaseMayHaveEnded reports whether fixed-lease hold h may have run out in
// Redis by t: its Lost closed by t plus lostSeen. The runtime closes Lost
// when the lease ends counted from the grant's send, never later than
// Redis lets it go; a grant of a lease of a few milliseconds may be gone
// from the replica by the time a read reaches it.
func leaseMayHaveEnded(h *Hold, t time.Time) bool {
	return h.Lease > 0 && !h.Lost.IsZero() && h.Lost.Before(t.Add(lostSeen))
}

// lostSeen is how late the rig may see a Lost channel closed after the
// runtime closed it (a worker's select, under -race, on a loaded machine).
const lostSeen = 5 * time.Millisecond

// unjudgedRenewals is l without the renewals seen inside an Unsafe window
// of their resource.
func (rx Relaxations) unjudgedRenewals(l *Log) *Log {
	c := *l
	c.Renewals = slices.DeleteFunc(slices.Clone(l.Renewals), func(rn Renewal) bool {
		for _, w := range rx.Unsafe {
			if w.covers(rn.Res) && !rn.T.Before(w.A) && rn.T.Before(w.B) {
				return true
			}
		}
		return false
	})
	return &c
}

// unjudgedUpgrades is l without the write acquires refused as a
// read-to-write upgrade whose owner's read release met an Unsafe window of
// the name before them: a lossy failover may have dropped that release, so
// the new master still shows the owner's read hold, and refusing the write
// is what the runtime must do then.
func (rx Relaxations) unjudgedUpgrades(l *Log) *Log {
	lost := func(c *Call) bool {
		for j := range l.Calls {
			r := &l.Calls[j]
			if r.Prim != PrimRead || r.Op != OpUnlock || !r.Start.Before(c.Start) ||
				!slices.Equal(r.Owners, c.Owners) || !slices.Equal(r.Res, c.Res) {
				continue
			}
			end := r.End
			if !r.Returned() {
				end = l.End
			}
			for _, w := range rx.Unsafe {
				if w.covers(c.Res[0]) && w.A.Before(c.Start) && !w.B.Before(r.Start) && !w.A.After(end) {
					return true
				}
			}
		}
		return false
	}
	out := *l
	out.Calls = slices.DeleteFunc(slices.Clone(l.Calls), func(c Call) bool {
		return c.Prim == PrimWrite && c.Op.acquires() && c.Out == OutInvalid &&
			strings.Contains(c.Err, "upgrade") && len(c.Res) == 1 && lost(&c)
	})
	return &out
}
