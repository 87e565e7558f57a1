package torture

import (
	"math/rand/v2"
	"time"
)

// menuItem is one kind of fault a topology plans: how many of each bag of
// faults are of this kind, and the range of its planned length (how long
// it lasts, or, for a fault that ends by itself, about how long it takes).
type menuItem struct {
	kind   FaultKind
	n      int
	lo, hi time.Duration
}

// The topology schedule's spacing: as the single-server Plan's, with
// shorter gaps (topology faults are rarer per second as they take longer).
const (
	topoFirstFault = 1500 * time.Millisecond
	topoMinGap     = 500 * time.Millisecond
	topoMaxGap     = 2500 * time.Millisecond
)

// planMenu is a topology's fault timeline, a pure function of its
// arguments: faults drawn from shuffled bags of menu (every bag has the
// whole mix, so a short run still sees every kind), one after another with
// gaps, a fresh generation of semaphore names about every semGenEvery, the
// fixed faults (sorted by At) at their times, and nothing planned to start
// in the last quietTail. Hook windows (FaultHook in menu) are planned as
// Plan plans them; clients is how many Clients each label has.
func planMenu(seed int64, d time.Duration, clients map[string]int, menu []menuItem, fixed []Planned) []Planned {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x746f706f))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var out []Planned
	var bag []menuItem
	at, nextGen := topoFirstFault, semGenEvery
	for at < d-quietTail {
		if len(fixed) > 0 && at >= fixed[0].At {
			f := fixed[0]
			fixed = fixed[1:]
			f.At = max(f.At, at)
			out = append(out, f)
			at = f.At + f.Dur + between(topoMinGap, topoMaxGap)
			continue
		}
		if at >= nextGen {
			out = append(out, Planned{At: at, Kind: SemGen, Server: "A"})
			nextGen += semGenEvery
			at += 200 * time.Millisecond
			continue
		}
		if len(bag) == 0 {
			for _, m := range menu {
				for range m.n {
					bag = append(bag, m)
				}
			}
			rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		m := bag[0]
		bag = bag[1:]
		p := Planned{At: at, Kind: m.kind, Server: "A", Dur: between(m.lo, m.hi), Seed: rng.Uint64()}
		if p.Kind == FaultHook {
			if rng.IntN(3) == 0 {
				p.Server = "B"
			}
			p.Client, p.Prob = -1, 0.2
			if n := clients[p.Server]; n > 0 && rng.IntN(2) == 0 {
				p.Client = rng.IntN(n)
			}
		}
		if at+p.Dur >= d-quietTail {
			break // it would run into the quiet tail
		}
		out = append(out, p)
		at += p.Dur + between(topoMinGap, topoMaxGap)
	}
	return out
}
