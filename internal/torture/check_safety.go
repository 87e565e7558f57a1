package torture

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// CheckMutualExclusion reports every pair of safe spans of one resource, by
// different owners, that overlap while at least one of them is exclusive
// (read holds share; a write hold excludes every other owner's hold). An
// overlap of at most lim.LostTolerance is forgiven when the span that ended
// first ended by Lost.
func CheckMutualExclusion(l *Log, spans []Span, lim Limits) []Violation {
	return exclusion(l, spans, lim, nil)
}

// exclusion is CheckMutualExclusion, leaving out the overlaps excused
// says are explained (nil: none), earlier span first.
func exclusion(l *Log, spans []Span, lim Limits, excused func(earlier, later Span) bool) []Violation {
	byRes := map[string][]Span{}
	for _, s := range spans {
		if !s.H.Prim.Counted() && !s.Empty() {
			byRes[s.H.Res] = append(byRes[s.H.Res], s)
		}
	}
	var vs []Violation
	for _, res := range sortedKeys(byRes) {
		ss := byRes[res]
		slices.SortFunc(ss, func(a, b Span) int { return a.A.Compare(b.A) })
		var active []Span
		for _, s := range ss {
			active = slices.DeleteFunc(active, func(a Span) bool { return !a.B.After(s.A) })
			for _, a := range active {
				if a.H.Owner == s.H.Owner || (!a.H.Prim.Exclusive() && !s.H.Prim.Exclusive()) {
					continue
				}
				first := a
				if s.B.Before(a.B) {
					first = s
				}
				overlap := first.B.Sub(s.A)
				if first.By == ByLost && overlap <= lim.LostTolerance || excused != nil && excused(a, s) {
					continue
				}
				vs = append(vs, Violation{Check: VExclusion, At: s.A, Msg: fmt.Sprintf(
					"%s: %s overlaps %s for %v", res, l.describe(a), l.describe(s), overlap)})
			}
			active = append(active, s)
		}
	}
	return vs
}

// CheckSemaphoreBound reports every moment the permits held of one semaphore
// (by safe spans) exceed lim.Permits, once per excursion above the bound.
// Each generation of names is its own semaphore; holds open at a restart of
// its server were cut there by SafeSpans, so the accounting starts over.
func CheckSemaphoreBound(l *Log, spans []Span, lim Limits) []Violation {
	type edge struct {
		t     time.Time
		delta int
		s     Span
	}
	byRes := map[string][]edge{}
	for _, s := range spans {
		if s.H.Prim.Counted() && !s.Empty() {
			byRes[s.H.Res] = append(byRes[s.H.Res], edge{s.A, s.H.N, s}, edge{s.B, -s.H.N, s})
		}
	}
	var vs []Violation
	for _, res := range sortedKeys(byRes) {
		es := byRes[res]
		// At equal times releases go first: [A, B) spans that touch do not
		// overlap.
		slices.SortFunc(es, func(a, b edge) int {
			if c := a.t.Compare(b.t); c != 0 {
				return c
			}
			return a.delta - b.delta
		})
		held, over := 0, false
		active := map[int]Span{}
		for _, e := range es {
			held += e.delta
			if e.delta > 0 {
				active[e.s.H.ID] = e.s
			} else {
				delete(active, e.s.H.ID)
			}
			switch {
			case held > lim.Permits && !over:
				over = true
				var who []string
				for _, id := range sortedKeys(active) {
					who = append(who, l.describe(active[id]))
				}
				vs = append(vs, Violation{Check: VPermits, At: e.t, Msg: fmt.Sprintf(
					"%s: %d permits held at %s, more than %d: %s", res, held, l.at(e.t), lim.Permits, strings.Join(who, "; "))})
			case held <= lim.Permits:
				over = false
			}
		}
	}
	return vs
}

// CheckFencingTokens reports fenced holds whose tokens do not grow with real
// time: when hold X's grant returned before hold Y's acquire call started,
// X's token must be lower than Y's; and no two holds share a token. Tokens
// follow the server's clock (fenced_lock.lua), so they are compared over
// the whole run, across Clients, restarts that lost the counter and
// failovers that lost writes, for every hold in spans that has a token.
func CheckFencingTokens(l *Log, spans []Span) []Violation {
	byRes := map[string][]*Hold{}
	for _, s := range spans {
		if h := s.H; h.Prim == PrimFenced && h.Token != 0 {
			byRes[h.Res] = append(byRes[h.Res], h)
		}
	}
	var vs []Violation
	for _, res := range sortedKeys(byRes) {
		hs := byRes[res]
		seen := map[uint64]*Hold{}
		for _, h := range hs {
			if o := seen[h.Token]; o != nil {
				vs = append(vs, Violation{Check: VFencing, At: h.Grant, Msg: fmt.Sprintf(
					"%s: token %d issued twice: hold #%d by %s granted %s and hold #%d by %s granted %s",
					res, h.Token, o.ID, o.Owner, l.at(o.Grant), h.ID, h.Owner, l.at(h.Grant))})
			}
			seen[h.Token] = h
		}
		byGrant := slices.Clone(hs)
		slices.SortFunc(byGrant, func(a, b *Hold) int { return a.Grant.Compare(b.Grant) })
		byStart := slices.Clone(hs)
		slices.SortFunc(byStart, func(a, b *Hold) int { return a.AcqStart.Compare(b.AcqStart) })
		var top *Hold // highest token among holds granted before the current call started
		i := 0
		for _, y := range byStart {
			for ; i < len(byGrant) && byGrant[i].Grant.Before(y.AcqStart); i++ {
				if top == nil || byGrant[i].Token > top.Token {
					top = byGrant[i]
				}
			}
			if top != nil && top.Token > y.Token { // equal tokens: reported above
				vs = append(vs, Violation{Check: VFencing, At: y.Grant, Msg: fmt.Sprintf(
					"%s: hold #%d by %s got token %d (call started %s) after hold #%d by %s had token %d (granted %s)",
					res, y.ID, y.Owner, y.Token, l.at(y.AcqStart), top.ID, top.Owner, top.Token, l.at(top.Grant))})
			}
		}
	}
	return vs
}

// CheckClientTokens reports a Client whose fencing tokens for a resource
// went back or repeated: when hold X's grant returned before hold Y's
// acquire call started, both of one Client (the owner's "<clientUUID>:"
// prefix), Y's token must be above X's. Unlike CheckFencingTokens it
// judges every fenced hold, across restarts and Unsafe windows: a Client
// remembers the highest token it has seen per name and never hands out one
// that is not above it, whatever the counter in Redis lost.
func CheckClientTokens(l *Log) []Violation {
	type key struct{ res, client string }
	groups := map[key][]*Hold{}
	for i := range l.Holds {
		h := &l.Holds[i]
		if h.Prim != PrimFenced || h.Token == 0 {
			continue
		}
		k := key{h.Res, clientOf(h.Owner)}
		groups[k] = append(groups[k], h)
	}
	var vs []Violation
	for _, hs := range groups {
		byGrant := slices.Clone(hs)
		slices.SortFunc(byGrant, func(a, b *Hold) int { return a.Grant.Compare(b.Grant) })
		byStart := slices.Clone(hs)
		slices.SortFunc(byStart, func(a, b *Hold) int { return a.AcqStart.Compare(b.AcqStart) })
		var top *Hold // highest token among the Client's holds granted before the current call started
		i := 0
		for _, y := range byStart {
			for ; i < len(byGrant) && byGrant[i].Grant.Before(y.AcqStart); i++ {
				if top == nil || byGrant[i].Token > top.Token {
					top = byGrant[i]
				}
			}
			if top != nil && top.Token >= y.Token {
				vs = append(vs, Violation{Check: VClientTok, At: y.Grant, Msg: fmt.Sprintf(
					"%s: hold #%d by %s got token %d (call started %s) after hold #%d of the same Client, by %s, had token %d (granted %s)",
					y.Res, y.ID, y.Owner, y.Token, l.at(y.AcqStart), top.ID, top.Owner, top.Token, l.at(top.Grant))})
			}
		}
	}
	return vs
}

// clientOf is the Client part of an owner id, "<clientUUID>:<handleID>".
func clientOf(owner string) string {
	if i := strings.LastIndexByte(owner, ':'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// sortedKeys returns m's keys in order, for deterministic reports.
func sortedKeys[K interface{ ~string | ~int }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
