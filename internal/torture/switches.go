package torture

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Switch is a moment the sentinels named a new master: the earliest a
// Client could learn of the switch (a Client's go-redis asks the sentinels
// the same question when it dials).
type Switch struct {
	At       time.Time
	From, To string
}

// switchPoll is how often switchWatch asks every sentinel.
const switchPoll = 10 * time.Millisecond

// switchWatch asks every sentinel, every switchPoll, which server is
// master, and records the first moment any of them names another one.
// Each sentinel is asked on a goroutine of its own: one that is stopped
// (a fault stops one) holds a question for the client's read timeout,
// whatever ctx says, and asked in turn it made every switch of that time
// late (a strict run judged an Unlock's ErrNotHeld against a switch
// recorded 300 ms after it).
type switchWatch struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	latest string   // the newest master any sentinel named
	at     []Switch // complete once done closes
}

// watchSwitches starts a switchWatch over the sentinels at addrs.
func watchSwitches(master string, addrs []string) *switchWatch {
	w := &switchWatch{stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, a := range addrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: a, DialTimeout: time.Second,
			ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			w.ask(c, master)
		}()
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	return w
}

// ask polls one sentinel until the watch stops.
func (w *switchWatch) ask(c *redis.SentinelClient, master string) {
	said := "" // this sentinel's last answer
	tick := time.NewTicker(switchPoll)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		hp, err := c.GetMasterAddrByName(ctx, master).Result()
		cancel()
		if err != nil || len(hp) != 2 {
			continue
		}
		addr := hp[0] + ":" + hp[1]
		w.heard(said, addr)
		said = addr
	}
}

// heard takes one sentinel's answer addr (its last one was said): a
// sentinel that changes its answer to a server none named last makes a
// switch (a lagging sentinel catching up to latest makes none).
func (w *switchWatch) heard(said, addr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := time.Now() // under mu: switches are recorded in time order
	switch {
	case addr == said:
	case w.latest == "":
		w.latest = addr
	case said != "" && addr != w.latest:
		w.at = append(w.at, Switch{At: at, From: w.latest, To: addr})
		w.latest = addr
	}
}

// end stops the watch and returns what it saw.
func (w *switchWatch) end() []Switch {
	close(w.stop)
	<-w.done
	return w.at
}

// unplannedLead is how long before the sentinels name a new master on
// their own the old one may have acknowledged writes its replica never
// got: down-after (1 s) to agree it is down, then the election and the
// promotion, within the failover timeout (5 s).
const unplannedLead = 5 * time.Second

// unplannedSwitches records, in a run judged with relaxations (not the
// strict one, which judges every switch itself), each switch no injected
// failover explains as what it is: as lossy as a planned one (an Unsafe
// window for every name, from unplannedLead before the switch to
// topoSettle after) and a fault window, where liveness is not judged.
func (r *runner) unplannedSwitches(l *Log) {
	for _, s := range l.Switches {
		if slices.ContainsFunc(r.topo.relax().Unsafe, func(w Window) bool {
			return w.In == nil && !s.At.Before(w.A) && !s.At.After(w.B)
		}) {
			continue // an injected failover's
		}
		iv := Interval{s.At.Add(-unplannedLead), s.At.Add(topoSettle)}
		r.topo.addUnsafe(iv, "a switch the sentinels made on their own", nil)
		l.Faults = append(l.Faults, Fault{Kind: FaultUnplanned, Server: "sentinel", Start: iv.A, End: iv.B,
			Detail: fmt.Sprintf("%s -> %s, named at %s", s.From, s.To, l.at(s.At))})
		r.logf("unplanned switch: the sentinels named %s (was %s) at %s, with no failover injected", s.To, s.From, l.at(s.At))
	}
	slices.SortStableFunc(l.Faults, func(a, b Fault) int { return a.Start.Compare(b.Start) })
}

// switchBefore is the latest switch in ss at or before t; ok false if none.
func switchBefore(ss []Switch, t time.Time) (s Switch, ok bool) {
	for _, x := range ss {
		if !x.At.After(t) {
			s, ok = x, true
		}
	}
	return s, ok
}

// switchNotice is how soon after the sentinels name a new master the
// runtime promises to have read its holds there (every 250ms until its
// pool follows), with room for a loaded machine: a hold missing there
// closes Lost by then.
const switchNotice = time.Second

// switchDuring reports whether the sentinels named a new master between
// from-switchNotice and to: a write sent in that time may have reached the
// former master only, and be gone.
func switchDuring(l *Log, from, to time.Time) bool {
	for _, s := range l.Switches {
		if !s.At.Before(from.Add(-switchNotice)) && !s.At.After(to) {
			return true
		}
	}
	return false
}

// toldOfSwitch reports whether an overlap of two spans is one a master
// switch explains, as CheckStrict allows: the later was granted after the
// sentinels named a new master, and one of the two was granted no later
// than switchNotice after that switch and ended (its Lost closed, or its
// owner let go) within switchNotice of the switch or of its own grant,
// whichever came last. The lost one may be either: the earlier hold, gone
// with the former master, or the later one, granted there by a Client
// whose pool had not followed yet.
func toldOfSwitch(l *Log, earlier, later Span) bool {
	s, ok := switchBefore(l.Switches, later.A)
	if !ok {
		return false
	}
	reach := s.At.Add(switchNotice)
	endedSoon := func(sp Span) bool {
		from := s.At
		if sp.A.After(from) {
			from = sp.A
		}
		return !sp.A.After(reach) && !sp.B.After(from.Add(switchNotice))
	}
	return endedSoon(earlier) || endedSoon(later)
}

// switchOverlap is one overlap toldOfSwitch excuses: the later hold
// entered at Entered, Length before one side ended, after Switch.
type switchOverlap struct {
	Res     string
	Entered time.Time
	Length  time.Duration
	Switch  Switch
}

// switchOverlaps lists the overlaps toldOfSwitch excuses, in time order.
func switchOverlaps(l *Log, lim Limits) []switchOverlap {
	var out []switchOverlap
	exclusion(l, SafeSpans(l), lim, func(a, b Span) bool {
		if !toldOfSwitch(l, a, b) {
			return false
		}
		end := a.B
		if b.B.Before(end) {
			end = b.B
		}
		s, _ := switchBefore(l.Switches, b.A)
		out = append(out, switchOverlap{Res: b.H.Res, Entered: b.A, Length: end.Sub(b.A), Switch: s})
		return true
	})
	slices.SortFunc(out, func(x, y switchOverlap) int { return x.Entered.Compare(y.Entered) })
	return out
}
