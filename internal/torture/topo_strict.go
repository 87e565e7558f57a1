package torture

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

// The strict Sentinel variant's Client options.
const (
	strictReplicas    = 1
	strictSyncTimeout = 500 * time.Millisecond
	strictWatchdog    = 1500 * time.Millisecond
	strictLostSlack   = 100 * time.Millisecond
	// strictSettleFree: a name must be free this long, plus the longest
	// lease in use, after the run and its faults are over.
	strictSettleFree = time.Second
)

// strictWeights is the strict variant's mix: Lock, FairLock, FencedLock
// and the read-write views, in every call shape (Lock, TryLock, with and
// without a wait or a fixed lease, reentrant), on names of their own.
var strictWeights = [numSteps]int{stepLock: 26, stepFair: 12, stepFenced: 12, stepRW: 16}

// strictTopo is a master with two replicas and three sentinels, judged
// by CheckStrict.
type strictTopo struct{ sentinelTopo }

// strictTopology is a Topology whose runs CheckStrict judges, with its
// own mix of steps.
type strictTopology interface {
	Topology
	strict() StrictLimits
	weights() *[numSteps]int
	sentinels() (master string, addrs []string) // whom switchWatch asks
}

// SentinelStrictTopology is the strict Sentinel torture: s (from
// StartSentinelReplicas with 2 replicas) with every Client given
// WithReplicaSync(1, 500ms) and WithWatchdogTimeout(1500ms), a workload of
// Lock, TryLock, FairLock, FencedLock and the read-write views only
// (strictWeights), and the faults SENTINEL FAILOVER, the master SIGSTOPped
// for 300-800ms and CLIENT KILL everywhere. Unlike SentinelTopology, its
// runs are judged by CheckStrict: nothing about safety is relaxed inside
// failover windows, and after the run every name must become free (see
// CheckSettle). A grant confirmed by the replica still attached to the
// old master and discarded when Sentinel re-points that replica (a full
// resync) is what it is meant to reach: the runtime re-reads its holds on
// the new master when the sentinels name one, and CheckStrict allows an
// overlap only when that told one of the two holders within switchNotice
// (toldOfSwitch).
func SentinelStrictTopology(s *redistest.Sentinel) Topology { return &strictTopo{sentinelTopo{s: s}} }

func (t *strictTopo) name() string { return "sentinel-strict" }

func (t *strictTopo) options() []lockactor.Option {
	return []lockactor.Option{lockactor.WithReplicaSync(strictReplicas, strictSyncTimeout),
		lockactor.WithWatchdogTimeout(strictWatchdog), lockactor.WithFairLockWaitTimeout(topoFairWait)}
}

func (t *strictTopo) strict() StrictLimits {
	return StrictLimits{Watchdog: strictWatchdog, Replicas: strictReplicas, LostSlack: strictLostSlack}
}

func (t *strictTopo) weights() *[numSteps]int { return &strictWeights }

func (t *strictTopo) plan(seed int64, d time.Duration, clients map[string]int) []Planned {
	var fixed []Planned
	if d < 3*time.Minute {
		// A short run gets a failover whatever the draw.
		fixed = []Planned{{At: 2 * time.Second, Kind: FaultFailover, Server: "A", Dur: 3 * time.Second,
			Seed: uint64(seed) ^ 0x737472696374}}
	}
	return planMenu(seed, d, clients, []menuItem{
		{FaultFailover, 2, 2 * time.Second, 4 * time.Second},
		{FaultStopMaster, 2, 300 * time.Millisecond, 800 * time.Millisecond},
		{FaultClientKill, 1, 100 * time.Millisecond, 100 * time.Millisecond},
		{FaultFailoverStopNew, 1, 300 * time.Millisecond, 600 * time.Millisecond},
		{FaultFailoverSentinelStopped, 1, 500 * time.Millisecond, 3 * time.Second},
	}, fixed)
}

// apply runs p: FaultFailoverStopNew here, every other fault as the
// Sentinel variant does.
func (t *strictTopo) apply(r *runner, tb testing.TB, p Planned) {
	if p.Kind != FaultFailoverStopNew {
		t.sentinelTopo.apply(r, tb, p)
		return
	}
	var old *redistest.Server
	if err := r.tryRig(tb, func(tb testing.TB) { old = t.s.WaitStable(tb) }); err != nil || r.stopping() {
		return
	}
	f := Fault{Kind: p.Kind, Server: "sentinel", Start: time.Now()}
	r.lossy(func() {
		done := make(chan error, 1)
		go func() { done <- r.tryRig(tb, func(tb testing.TB) { t.s.Failover(tb) }) }()
		stopped := "no new master named within 10s"
		for give := time.Now().Add(10 * time.Second); time.Now().Before(give); time.Sleep(5 * time.Millisecond) {
			if m := t.s.Master(); m != nil && m != old {
				stopped = r.sigstop(tb, time.Now(), m, p.Dur, true, nil)
				break
			}
		}
		err := <-done
		r.topo.addUnsafe(Interval{f.Start, time.Now().Add(topoSettle)}, "SENTINEL FAILOVER, new master stopped", nil)
		f.Detail = fmt.Sprintf("%s -> %s (rig: %v)", old.Addr(), stopped, err)
	})
	f.End = time.Now()
	r.record(f)
}

// strict returns the run's StrictLimits when its topology is strict.
func (r *runner) strict() (StrictLimits, bool) {
	if st, ok := r.cfg.Topology.(strictTopology); ok {
		return st.strict(), true
	}
	return StrictLimits{}, false
}

// weights is the workload's mix of steps.
func (r *runner) weights() *[numSteps]int {
	if st, ok := r.cfg.Topology.(strictTopology); ok {
		return st.weights()
	}
	return &stepWeights
}

// check runs the run's checker over l: CheckStrict for a strict topology,
// CheckTopology (Check, without one) otherwise.
func (r *runner) check(l *Log) []Violation {
	if sl, ok := r.strict(); ok {
		return CheckStrict(l, r.lim, r.topo.relax(), sl)
	}
	return CheckTopology(l, r.lim, r.topo.relax())
}

// settle runs once the workers have stopped and the last fault is over.
// A strict run reads every name of its mix until it has no key, and
// records what it saw in l.Settle for CheckSettle; nothing is repaired
// first. Other runs settle the fair queues a lossy failover may have left
// (settleFairQueues) and check that they drained.
func (r *runner) settle(l *Log) {
	if _, ok := r.strict(); !ok {
		if r.cfg.Topology != nil {
			r.settleFairQueues()
		}
		r.checkFairQueues()
		return
	}
	s := &Settle{From: time.Now(), Within: strictSettleFree + longestLease(l, strictWatchdog)}
	ctx, cancel := context.WithTimeout(context.Background(), s.Within+5*time.Second)
	defer cancel()
	due := s.From.Add(s.Within)
	for _, name := range mixNames(r.weights()) {
		n := NameSettle{Name: "A/" + name}
		keys := settleKeys(name)
		var err error
		if pollUntil(due, func() bool { k, e := r.admin["A"].Exists(ctx, keys...).Result(); err = e; return e == nil && k == 0 }) {
			n.Free = time.Now()
		} else {
			n.Left = describeKeys(ctx, r.admin["A"], keys, err)
		}
		s.Names = append(s.Names, n)
	}
	l.Settle = s
}

// mixNames are the lock names the steps of weights take (on server A).
func mixNames(weights *[numSteps]int) []string {
	var prefixes []string
	for _, p := range []struct {
		step   int
		prefix string
	}{{stepLock, "lock"}, {stepFair, "fair"}, {stepFenced, "fenced"}, {stepRW, "rw"}} {
		if weights[p.step] > 0 {
			prefixes = append(prefixes, p.prefix)
		}
	}
	return namesOf(prefixes...)
}

// settleKeys are the keys a name has while anyone holds or waits for it:
// its hash, and a fair lock's queue and timeouts (the fencing counter
// stays by design).
func settleKeys(name string) []string {
	keys := []string{name}
	if strings.HasPrefix(name, "fair") {
		keys = append(keys, redisio.FairQueue(name), redisio.FairTimeouts(name))
	}
	return keys
}

// describeKeys renders what is left of keys, for a settle violation.
func describeKeys(ctx context.Context, rdb redis.UniversalClient, keys []string, err error) string {
	if err != nil {
		return fmt.Sprintf("unreadable: %v", err)
	}
	var parts []string
	for _, k := range keys {
		typ, _ := rdb.Type(ctx, k).Result()
		ttl, _ := rdb.PTTL(ctx, k).Result()
		var v any
		switch typ {
		case "none":
			continue
		case "hash":
			v, _ = rdb.HGetAll(ctx, k).Result()
		case "list":
			v, _ = rdb.LRange(ctx, k, 0, -1).Result()
		case "zset":
			v, _ = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		}
		parts = append(parts, fmt.Sprintf("%s (%s, pttl %v) %v", k, typ, ttl, v))
	}
	return strings.Join(parts, "; ")
}

// topoFigures are the topology's figures, with the replica-sync counts
// when sync is on; a strict run's say what it cuts nothing at and add the
// renewal confirmations and settle counts.
func (r *runner) topoFigures(l *Log) map[string]int {
	m := r.topo.figures(l)
	m["releases lost in a switch, sent again"] = int(r.resent.Load())
	m["releases lost in a switch, sent again in vain"] = int(r.resentFailed.Load())
	m["Clients writing to a new master ahead of their pool"] = int(r.routed.Load())
	if t := &r.topo.sent; t.GrantsWait.Load() > 0 || t.RenewalsWait.Load() > 0 {
		// Replica sync is on (WAIT was sent): how much went without it.
		m["grant scripts sent with WAIT"] = int(t.GrantsWait.Load())
		m["grant scripts sent without WAIT"] = int(t.GrantsNoWait.Load())
		m["renewals sent with WAIT"] = int(t.RenewalsWait.Load())
		m["renewals sent without WAIT"] = int(t.RenewalsNoWait.Load())
		m["master INFO reads failed (synced by the last count)"] = int(t.InfoFailed.Load())
	}
	sl, ok := r.strict()
	if !ok {
		return m
	}
	delete(m, "holds left out (granted in an unsafe window)")
	delete(m, "holds cut at an unsafe window")
	delete(m, "fair queues settled after unsafe windows")
	m["failover windows (renewals, ghost probes not judged)"] = m["unsafe windows"]
	delete(m, "unsafe windows")
	// Counted even when zero, so that a run's figures show each of them.
	m["holds whose Lost closed while held"], m["names not free at the settle"] = 0, 0
	m["master switches (sentinels naming a new one)"] = len(l.Switches)
	overlaps := switchOverlaps(l, r.lim)
	m["overlaps after a switch, one side told within 1s (allowed)"] = len(overlaps)
	m["longest allowed overlap after a switch (ms)"] = 0
	for _, o := range overlaps {
		m["longest allowed overlap after a switch (ms)"] = max(m["longest allowed overlap after a switch (ms)"], int(o.Length.Milliseconds()))
	}
	r.reportNews(l, overlaps)
	for _, rr := range l.RenewReplies {
		switch {
		case rr.Acks < 0:
			m["renewals answered 1, no WAIT (taken as confirmed)"]++
		case rr.Acks >= sl.Replicas:
			m["renewals answered 1, confirmed by WAIT"]++
		default:
			m["renewals answered 1, not confirmed by WAIT"]++
		}
	}
	for i := range l.Holds {
		if !l.Holds[i].Lost.IsZero() {
			m["holds whose Lost closed while held"]++
		}
	}
	if l.Settle != nil {
		for _, n := range l.Settle.Names {
			if n.Free.IsZero() {
				m["names not free at the settle"]++
			}
		}
	}
	return m
}

// reportNews logs, per switch, when the sentinels announced each step of
// it, and per allowed overlap, its length and when the later holder
// entered against the switch: the measure of how soon a Client could
// learn of a failover from the sentinels' own news.
func (r *runner) reportNews(l *Log, overlaps []switchOverlap) {
	var prev time.Time
	for _, s := range l.Switches {
		r.logf("switch %s -> %s named at %s; sentinel news against it: %s", s.From, s.To, l.at(s.At), newsBefore(l.News, s, prev))
		prev = s.At
	}
	lengths := make([]time.Duration, 0, len(overlaps))
	for _, o := range overlaps {
		lengths = append(lengths, o.Length)
		r.logf("allowed overlap %v on %s: the later holder entered %+.3fs after the switch named at %s",
			o.Length.Round(time.Millisecond), o.Res, o.Entered.Sub(o.Switch.At).Seconds(), l.at(o.Switch.At))
	}
	if len(lengths) > 0 {
		slices.Sort(lengths)
		q := func(p float64) time.Duration { return lengths[int(p*float64(len(lengths)-1))].Round(time.Millisecond) }
		r.logf("allowed overlaps: %d, length p50 %v, p90 %v, max %v", len(lengths), q(0.5), q(0.9), q(1))
	}
}
