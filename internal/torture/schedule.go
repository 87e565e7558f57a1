package torture

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Planned is one fault (or semaphore generation switch) of a Schedule.
type Planned struct {
	At     time.Duration // offset from the start of the run
	Kind   FaultKind
	Server string        // "A" or "B"
	Dur    time.Duration // hook window, pause or restart downtime; 0 for instant faults
	// Client is the hook's target: an index into the server's Clients, or -1
	// for all of them.
	Client int
	Prob   float64 // hook: chance that a command is hit
	Seed   uint64  // hook: seeds its per-command draws
	Class  string  // block: the class of command refused (ClassRelease, ClassResolve)
	// Lag is how late a FaultSubDelay window makes pub/sub reads arrive,
	// or a FaultSlowLink window each command go out.
	Lag time.Duration
}

// String describes the planned fault for logs.
func (p Planned) String() string {
	s := fmt.Sprintf("+%.3fs %s on %s", p.At.Seconds(), p.Kind, p.Server)
	if p.Dur > 0 {
		s += fmt.Sprintf(" for %v", p.Dur)
	}
	if p.Kind == FaultHook {
		s += fmt.Sprintf(" (client %d, p=%.2f)", p.Client, p.Prob)
	}
	if p.Kind == FaultBlock {
		s += fmt.Sprintf(" (client %d, %s)", p.Client, p.Class)
	}
	if p.Kind == FaultLate {
		s += " (release replies late)"
	}
	if p.Kind == FaultSubDelay {
		s += fmt.Sprintf(" (client %d, pub/sub %v late)", p.Client, p.Lag)
	}
	if p.Kind == FaultSlowLink {
		s += fmt.Sprintf(" (client %d, commands %v late)", p.Client, p.Lag)
	}
	return s
}

// Schedule parameters: the gaps keep "a few faults per 10s", every fault is
// much shorter than the 3s watchdog so a correct library keeps its locks,
// restarts come at most once per restartEvery, and nothing starts in the
// last quietTail of the run so the end-of-run checks see a settled system.
const (
	firstFault   = 1500 * time.Millisecond
	minGap       = 1 * time.Second
	maxGap       = 4 * time.Second
	restartEvery = 30 * time.Second
	firstRestart = 8 * time.Second
	semGenEvery  = 10 * time.Second
	quietTail    = 6 * time.Second
)

// Plan is the run's fault timeline, a pure function of seed and the run's
// length: faults one after another, never overlapping (each starts after the
// previous one's planned end plus a gap), and a switch to a fresh generation
// of semaphore names about every semGenEvery, placed between faults.
// clients is how many hooked Clients each server has.
func Plan(seed int64, d time.Duration, clients map[string]int) []Planned {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x70727475726521))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var out []Planned
	at := firstFault
	lastRestart := time.Duration(-1)
	nextGen := semGenEvery
	var bag []FaultKind
	for at < d-quietTail {
		if at >= nextGen {
			out = append(out, Planned{At: at, Kind: SemGen, Server: "A"})
			nextGen += semGenEvery
			at += 200 * time.Millisecond
			continue
		}
		if len(bag) == 0 {
			// A shuffled bag rather than independent draws: every stretch of
			// eight faults has the same mix, so no seed goes without hook
			// windows (where most bugs show) or without a restart slot.
			bag = []FaultKind{FaultHook, FaultHook, FaultHook, FaultKillPubSub, FaultKillNormal, FaultPause, FaultPause, FaultRestart,
				FaultBlock, FaultBlock, FaultBlock, FaultBlock, FaultLate, FaultLate, FaultScriptFlush, FaultDenyPublish,
				FaultSubDelay, FaultSubDelay, FaultSlowLink, FaultSlowLink, FaultTokenDelete}
			rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		p := Planned{At: at, Kind: bag[0], Server: "A"}
		bag = bag[1:]
		if rng.IntN(3) == 0 {
			p.Server = "B"
		}
		if p.Kind == FaultRestart {
			if at < firstRestart || (lastRestart >= 0 && at-lastRestart < restartEvery) {
				// Not allowed yet: a hook window now, the restart later.
				p.Kind = FaultHook
				bag = append(bag, FaultRestart)
			} else {
				p.Server, lastRestart = "A", at
			}
		}
		switch p.Kind {
		case FaultHook:
			p.Dur = between(500*time.Millisecond, 2*time.Second)
			p.Client = -1
			if n := clients[p.Server]; n > 0 && rng.IntN(2) == 0 {
				p.Client = rng.IntN(n)
			}
			p.Prob = 0.2
			p.Seed = rng.Uint64()
		case FaultPause:
			p.Dur = between(200*time.Millisecond, 800*time.Millisecond)
		case FaultRestart:
			// Half of them keep the server down for longer than a Client
			// goes without a reply before it asks, with a PING, whether
			// Redis can be reached at all (CheckOutageNamed).
			if rng.IntN(2) == 0 {
				p.Dur = between(1500*time.Millisecond, 2500*time.Millisecond)
			}
		case FaultBlock:
			// Releases refused past a fixed lease and past the watchdog's
			// (their hold expires while the release is owed); settlements
			// refused past a latch record's life (LatchKeep in the run's
			// options, a final release's 5s record before the fixes). Half
			// of them hit every Client of the server, so that they meet
			// the hand-offs, re-locks and shared names of busy Clients.
			p.Server = "A" // where every primitive lives
			p.Client = -1
			if rng.IntN(2) == 0 {
				p.Client = rng.IntN(max(clients[p.Server], 1))
			}
			p.Class, p.Dur = ClassRelease, between(2*time.Second, 6*time.Second)
			if rng.IntN(2) == 0 {
				p.Class, p.Dur = ClassResolve, between(6*time.Second, 10*time.Second)
			}
			p.Seed = rng.Uint64()
		case FaultLate:
			p.Server = "A"
			p.Dur = between(4*time.Second, 8*time.Second)
			p.Seed = rng.Uint64()
		case FaultDenyPublish:
			p.Dur = between(1*time.Second, 4*time.Second)
		case FaultSubDelay:
			// Where the latch rounds run; long enough to cover several,
			// and late by more than a command's round trip, less than the
			// liveness bound.
			p.Server, p.Client = "A", -1
			if rng.IntN(2) == 0 {
				p.Client = rng.IntN(max(clients[p.Server], 1))
			}
			p.Dur = between(3*time.Second, 6*time.Second)
			p.Lag = between(20*time.Millisecond, 120*time.Millisecond)
		case FaultSlowLink:
			// One Client of A (every primitive lives there), a lag of
			// about a fair burst's gaps, well under every lease.
			p.Server, p.Client = "A", rng.IntN(max(clients["A"], 1))
			p.Dur = between(2*time.Second, 4*time.Second)
			p.Lag = between(20*time.Millisecond, 80*time.Millisecond)
		}
		out = append(out, p)
		// A restart itself takes up to a second or two; leave it room.
		extra := time.Duration(0)
		if p.Kind == FaultRestart {
			extra = 2 * time.Second
		}
		at += p.Dur + extra + between(minGap, maxGap)
	}
	return out
}
