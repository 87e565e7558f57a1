package torture

import (
	"strings"
	"time"
)

// EndBy says what ended a hold's span.
type EndBy uint8

// What can end a span: the owner's Unlock (Release), the Lost channel, a
// fixed lease running out, a ForceUnlock of the name, a restart of its
// server, or the end of the run (the hold was never released).
const (
	ByUnlock EndBy = iota
	ByLost
	ByLease
	ByForce
	ByRestart
	ByRunEnd
)

var endByNames = [...]string{"unlock", "lost", "lease", "force-unlock", "restart", "run-end"}

// String names what ended the span.
func (b EndBy) String() string { return endByNames[b] }

// Span is the effective interval of one hold.
type Span struct {
	Interval
	H  *Hold
	By EndBy
}

// restartMargin: a grant that reached its caller up to this long after a
// restarted server answered again may still come from a script the old server
// ran before it was killed (the reply travels through the actor's mailbox);
// such holds are cut at the restart rather than trusted.
const restartMargin = 250 * time.Millisecond

// SafeSpans is, for every hold, the part during which a correct library
// guarantees the owner alone holds it: from the grant reaching the caller to
// the earliest of just before the Unlock, Lost closing, the earliest moment a
// fixed lease could run out, a ForceUnlock of the name, and a restart of its
// server (Redis forgot it). Mutual exclusion and the permit bound are checked
// over these; cutting early can only hide an overlap, never invent one.
func SafeSpans(l *Log) []Span { return spans(l, false) }

// LiveSpans is, for every hold, the longest the resource may really have
// stayed taken: to the Unlock's return (the release runs during the call),
// Lost, the latest moment a fixed lease could run out, the end of a
// ForceUnlock of the name, or a restart's completion. Liveness is checked
// against these; ending late can only hide a gap, never invent one.
func LiveSpans(l *Log) []Span { return spans(l, true) }

func spans(l *Log, live bool) []Span {
	forces := map[string][]*Call{}
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Op == OpForceUnlock && len(c.Res) > 0 {
			forces[c.Res[0]] = append(forces[c.Res[0]], c)
		}
	}
	out := make([]Span, 0, len(l.Holds))
	for i := range l.Holds {
		h := &l.Holds[i]
		s := Span{H: h, Interval: Interval{h.Grant, h.End}, By: ByUnlock}
		if live && !h.Done.IsZero() {
			s.B = h.Done
		}
		if s.B.IsZero() {
			s.B, s.By = l.End, ByRunEnd
		}
		cut := func(t time.Time, by EndBy) {
			if !t.IsZero() && t.Before(s.B) {
				s.B, s.By = maxTime(t, s.A), by
			}
		}
		cut(h.Lost, ByLost)
		if live {
			cut(h.LeaseLate, ByLease)
		} else {
			cut(h.LeaseUntil, ByLease)
		}
		for _, f := range forces[h.Res] {
			fEnd := f.End
			if fEnd.IsZero() {
				fEnd = l.End
			}
			// The deletion ran somewhere in [f.Start, fEnd] and the grant's
			// script somewhere in [AcqStart, Grant]: a hold whose script may
			// have run before the deletion ends with it.
			if !h.AcqStart.Before(fEnd) || !s.B.After(f.Start) {
				continue
			}
			if live && survived(h) {
				// The grant's script ran after the deletion after all: the
				// owner's Unlock found the hold, and Lost never closed.
				// Ending it at the deletion would invent a gap.
				continue
			}
			if live {
				cut(fEnd, ByForce)
			} else {
				cut(f.Start, ByForce)
			}
		}
		server := serverOf(h.Res)
		for _, f := range l.Faults {
			if f.Kind != FaultRestart || f.Server != server {
				continue
			}
			if !h.Grant.Before(f.End.Add(restartMargin)) || !s.B.After(f.Start) {
				continue
			}
			if live {
				cut(f.End, ByRestart)
			} else {
				cut(f.Start, ByRestart)
			}
		}
		out = append(out, s)
	}
	return out
}

// survived reports evidence that a hold outlived every ForceUnlock that may
// have deleted it: its Unlock returned OK and its Lost channel never closed.
func survived(h *Hold) bool {
	return h.Lost.IsZero() && !h.Done.IsZero() && h.DoneOut == OutOK
}

// serverOf is the server part of a resource "<server>/<name>".
func serverOf(res string) string {
	server, _, _ := strings.Cut(res, "/")
	return server
}
