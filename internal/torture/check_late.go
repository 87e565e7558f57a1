package torture

import (
	"fmt"
	"slices"
	"strings"
)

// CheckLateLost reports holds whose Lost channel closed after their owner
// had called the last Unlock, when the release is known to have done its
// work: the Unlock returned nil, or the hook saw the release script run in
// Redis on the owner's field (and withheld its reply) while that Unlock was
// out. Either way the hold was released, not lost; a Lost closing later
// means the runtime decided the release had not run and sent it again (and
// a release sent twice can free a later hold of the same owner).
//
// A Lost closing after an Unlock that failed is not reported otherwise: the
// runtime keeps releasing in the background and may find the hold expired.
// Nor is one that closed while an Unlock was out that the hold's fixed
// lease had outlived by the runtime's count (from its grant's send, which
// Redis counts from a little later): the lease ended before the release
// reached the actor, and the release still found the hold in Redis.
func CheckLateLost(l *Log) []Violation {
	byKey := map[string][]*Withheld{}
	for i := range l.Withheld {
		w := &l.Withheld[i]
		if w.Reply != "nil" { // nil: the owner held nothing; nothing was released
			k := w.Server + "/" + w.Key
			byKey[k] = append(byKey[k], w)
		}
	}
	var vs []Violation
	for i := range l.Holds {
		h := &l.Holds[i]
		if !h.LostLate || leaseEndedInUnlock(h) {
			continue
		}
		switch {
		case h.DoneOut == OutOK && !h.Done.IsZero():
			vs = append(vs, Violation{Check: VLateLost, At: h.Done, Msg: fmt.Sprintf(
				"%s: %s hold (g%d, owner %s) granted %s: its last Unlock [%s, %s] returned nil, and its Lost channel closed afterwards",
				h.Res, h.Prim, h.G, h.Owner, l.at(h.Grant), l.at(h.End), l.at(h.Done))})
		case h.Prim == PrimLock || h.Prim == PrimFenced || h.Prim == PrimFair:
			done := doneOf(l, h)
			for _, w := range byKey[h.Res] {
				if w.T.Before(h.End) || w.T.After(done) || !slices.Contains(w.Args, h.Owner) {
					continue
				}
				vs = append(vs, Violation{Check: VLateLost, At: w.T, Msg: fmt.Sprintf(
					"%s: %s hold (g%d, owner %s) granted %s: its last Unlock [%s, %s -> %s] ran in Redis at %s (reply %s withheld by the hook: %s), and its Lost channel closed afterwards",
					h.Res, h.Prim, h.G, h.Owner, l.at(h.Grant), l.at(h.End), l.at(done), h.DoneOut, l.at(w.T), w.Reply, strings.Join(w.Args[:2], " "))})
				break
			}
		}
	}
	return vs
}

// leaseEndedInUnlock reports whether h's Lost closed while its last Unlock
// was out, by which time its fixed lease could have run out as the runtime
// counts it (see CheckLateLost).
func leaseEndedInUnlock(h *Hold) bool {
	return h.Lease > 0 && h.LostInUnlock && !h.Done.Before(h.LeaseUntil)
}
