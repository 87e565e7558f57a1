package torture

import (
	"strings"
	"testing"
	"time"
)

// Synthetic logs: every time is a millisecond offset from t0.

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// hl is a hold granted at grant (its call started 1ms before) and released
// just before end (the Unlock returned 1ms after).
func hl(id int, prim Prim, res, owner string, grant, end int) Hold {
	return Hold{ID: id, Prim: prim, Res: res, Owner: owner, N: 1, AcqStart: at(grant - 1), Grant: at(grant),
		End: at(end), Done: at(end + 1), DoneOut: OutOK}
}

// sem is a semaphore hold of n permits.
func sem(id int, res string, n, grant, end int) Hold {
	h := hl(id, PrimSem, res, "", grant, end)
	h.N = n
	return h
}

// lost makes h end by Lost at ms.
func lost(h Hold, ms int) Hold { h.Lost = at(ms); return h }

// waitCall is a waiting Lock call on res by owner over [start, end].
func waitCall(id int, prim Prim, res, owner string, start, end int, out Outcome) Call {
	return Call{ID: id, Prim: prim, Op: OpLock, Res: []string{res}, Owners: []string{owner}, Waiting: true,
		Start: at(start), End: at(end), CtxEnd: at(end), Out: out, Client: "A1"}
}

func logOf(end int, holds []Hold, calls []Call, faults []Fault) *Log {
	return &Log{Start: t0, End: at(end), Holds: holds, Calls: calls, Faults: faults}
}

// expect checks that exactly the wanted checks fired (by name, in any
// order), printing the violations otherwise.
func expect(t *testing.T, got []Violation, want ...string) {
	t.Helper()
	var names []string
	for _, v := range got {
		names = append(names, v.Check)
	}
	if strings.Join(sortedCopy(names), ",") != strings.Join(sortedCopy(want), ",") {
		var b strings.Builder
		for _, v := range got {
			b.WriteString("\n  " + v.String())
		}
		t.Fatalf("violations %v, want %v:%s", names, want, b.String())
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
