package torture

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// sentinelTopo is a master, a replica and three sentinels.
type sentinelTopo struct {
	s      *redistest.Sentinel
	hooked atomic.Int32 // workload Clients made so far
}

// SentinelTopology runs the workload on s (from StartSentinel) with the
// runtime's default options, through go-redis FailoverClients and, for
// every other workload Client, a FailoverClusterClient (a ClusterClient
// over the group, whose commands and subscriptions must follow a switch
// in their own way). Its faults:
// graceful failovers (SENTINEL FAILOVER), some made while one sentinel is
// SIGSTOPped (a Client's go-redis may ask that one), crash failovers (the master
// killed, the replica promoted, the old master restarted, to be made a
// replica by the sentinels), the master SIGSTOPped for 300-800ms (less than
// the sentinels' down-after, so no failover: strict), the replica
// SIGSTOPped, CLIENT KILL everywhere, and hook windows.
//
// What is relaxed, and why (SentinelStrictTopology judges without it):
// a Sentinel switch is not lossless. Requests sent to the old master after
// the promotion (until the Clients learn of the switch) run there and are
// discarded when it resynchronises from the new master, renewals that
// landed there extended holds locally, and a fixed-lease holder is never
// told. So every failover is an Unsafe window for every name, from the
// SENTINEL FAILOVER (or the kill) to the promotion plus topoSettle: holds
// open at its start are cut there, holds granted inside it are left out of
// mutual exclusion, the permit bound and fencing, and tokens are compared
// only between switches. Outside those windows every check is as strict as
// on a single server, and no caller may be left unanswered anywhere.
func SentinelTopology(s *redistest.Sentinel) Topology { return &sentinelTopo{s: s} }

func (t *sentinelTopo) name() string { return "sentinel" }

// sentinels are whom switchWatch asks (see unplannedSwitches).
func (t *sentinelTopo) sentinels() (string, []string) { return t.s.MasterName(), t.s.Addrs() }

func (t *sentinelTopo) newClient(hook redis.Hook) redis.UniversalClient {
	opt := &redis.FailoverOptions{MasterName: t.s.MasterName(), SentinelAddrs: t.s.Addrs()}
	if hook == nil {
		return redis.NewFailoverClient(opt)
	}
	if t.hooked.Add(1)%2 == 0 {
		// Pipelines go to its node clients directly: the hook goes there.
		rdb := redis.NewFailoverClusterClient(opt)
		rdb.OnNewNode(func(n *redis.Client) { n.AddHook(hook) })
		return rdb
	}
	rdb := redis.NewFailoverClient(opt)
	rdb.AddHook(hook)
	return rdb
}

func (t *sentinelTopo) options() []lockactor.Option {
	return []lockactor.Option{lockactor.WithFairLockWaitTimeout(topoFairWait)}
}

func (t *sentinelTopo) replica() *redistest.Server { return nil }

func (t *sentinelTopo) plan(seed int64, d time.Duration, clients map[string]int) []Planned {
	menu := []menuItem{
		{FaultFailover, 2, 2 * time.Second, 4 * time.Second},
		{FaultCrash, 1, 4 * time.Second, 6 * time.Second},
		{FaultFailoverSentinelStopped, 1, 500 * time.Millisecond, 3 * time.Second},
		{FaultStopMaster, 2, 300 * time.Millisecond, 800 * time.Millisecond},
		{FaultStopReplica, 1, 300 * time.Millisecond, 1500 * time.Millisecond},
		{FaultClientKill, 1, 100 * time.Millisecond, 100 * time.Millisecond},
		{FaultHook, 2, 500 * time.Millisecond, 2 * time.Second},
		{FaultQuietFailover, 1, 2 * time.Second, 4 * time.Second},
	}
	var fixed []Planned
	if d < 3*time.Minute {
		// A short run gets one failover of each kind whatever the draw,
		// and no more (not the sentinel-stopped one, third in the menu,
		// nor the quiet one, last): each makes some 5s of the run an
		// Unsafe window.
		menu = menu[3 : len(menu)-1]
		rng := rand.New(rand.NewPCG(uint64(seed), 0x73656e))
		fixed = []Planned{
			{At: 3 * time.Second, Kind: FaultFailover, Server: "A", Dur: 3 * time.Second, Seed: rng.Uint64()},
			{At: d / 2, Kind: FaultCrash, Server: "A", Dur: 5 * time.Second, Seed: rng.Uint64()},
		}
	}
	return planMenu(seed, d, clients, menu, fixed)
}

func (t *sentinelTopo) apply(r *runner, tb testing.TB, p Planned) {
	// Faults start from a stable deployment (after a crash the sentinels
	// take 10-20s to make the restarted master a replica); the wait is not
	// part of the fault.
	var master *redistest.Server
	if err := r.tryRig(tb, func(tb testing.TB) { master = t.s.WaitStable(tb) }); err != nil || r.stopping() {
		return // not stable (counted), or the run ended while it settled
	}
	f := Fault{Kind: p.Kind, Server: "sentinel", Start: time.Now()}
	switch p.Kind {
	case FaultFailover:
		r.lossy(func() {
			var to *redistest.Server
			err := r.tryRig(tb, func(tb testing.TB) { to = t.s.Failover(tb) })
			// Relaxed even when the rig gave up: the sentinels may have
			// switched, or half-switched, meanwhile, and may yet.
			t.settleAfter(r, tb, err)
			r.topo.addUnsafe(Interval{f.Start, time.Now().Add(topoSettle)}, "SENTINEL FAILOVER", nil)
			f.Detail = fmt.Sprintf("%s -> %v (rig: %v)", master.Addr(), to, err)
			if err == nil {
				f.Detail = fmt.Sprintf("%s -> %s", master.Addr(), to.Addr())
			}
		})
	case FaultFailoverSentinelStopped:
		r.lossy(func() { f.Detail = t.failoverSentinelStopped(r, tb, p, master) })
		r.topo.addUnsafe(Interval{f.Start, time.Now().Add(topoSettle)}, "SENTINEL FAILOVER, a sentinel stopped", nil)
		// The resumed sentinel learns the new master from the others'
		// hellos at once, but the replicas' state only from its INFO to
		// them, every 10 s: asked to fail over before then (the rig asks
		// the first sentinel that answers), it stayed "in progress" past
		// the rig's 30 s. The run goes on meanwhile; only the next fault
		// waits.
		time.Sleep(sentinelInfoEvery)
	case FaultQuietFailover:
		r.lossy(func() {
			var to *redistest.Server
			err := r.tryRig(tb, func(tb testing.TB) { to = t.s.Failover(tb) })
			f.Detail = fmt.Sprintf("%s -> %v (rig: %v); no window opened: the switch watch must find it", master.Addr(), to, err)
		})
	case FaultCrash:
		r.lossy(func() {
			var to *redistest.Server
			err := r.tryRig(tb, func(tb testing.TB) { to = t.s.CrashFailover(tb) })
			r.topo.addUnsafe(Interval{f.Start, time.Now().Add(topoSettle)}, "master killed", nil)
			master.Restart(tb)
			f.Detail = fmt.Sprintf("%s killed, promotion: %v; %s restarted empty", master.Addr(), err, master.Addr())
			if err == nil {
				f.Detail = fmt.Sprintf("%s killed, %s promoted; %s restarted empty", master.Addr(), to.Addr(), master.Addr())
			}
		})
	case FaultStopMaster, FaultStopReplica:
		s := master
		if p.Kind == FaultStopReplica {
			s = t.s.Replica()
		}
		f.Detail = r.sigstop(tb, f.Start, s, p.Dur, p.Kind == FaultStopMaster, nil)
		if now := t.s.Master(); now != master {
			// Not planned: a stop meant to be shorter than down-after led
			// to a failover after all; it is as lossy as a planned one.
			r.topo.addUnsafe(Interval{f.Start, time.Now().Add(topoSettle)}, "failover after a SIGSTOP", nil)
			f.Detail += "; the sentinels failed over"
		}
	case FaultClientKill:
		f.Detail = clientKill(t.s.Servers())
	}
	f.End = time.Now()
	r.record(f)
}

// sentinelInfoEvery is how often a sentinel asks the replicas it knows
// for their INFO outside a failover (Redis: 10 s), and a little more.
const sentinelInfoEvery = 11 * time.Second

// failoverSentinelStopped runs FaultFailoverSentinelStopped: one sentinel
// (drawn by the fault's seed) is stopped, the others fail over, and it
// resumes p.Dur after the failover. It returns the fault's detail.
func (t *sentinelTopo) failoverSentinelStopped(r *runner, tb testing.TB, p Planned, master *redistest.Server) string {
	sentinels := t.s.Sentinels()
	stopped := sentinels[targetRNG(p).IntN(len(sentinels))]
	var to *redistest.Server
	stopped.Pause(tb)
	err := r.tryRig(tb, func(tb testing.TB) { to = t.s.Failover(tb) })
	time.Sleep(p.Dur)
	stopped.Resume(tb)
	t.settleAfter(r, tb, err)
	if err != nil {
		return fmt.Sprintf("%s -> %v, sentinel %s stopped (rig: %v)", master.Addr(), to, stopped.Addr(), err)
	}
	return fmt.Sprintf("%s -> %s, sentinel %s stopped until %v after", master.Addr(), to.Addr(), stopped.Addr(), p.Dur)
}

// settleAfter waits, after a failover the rig gave up on (err), until the
// deployment is stable again, so that the fault's Unsafe window covers the
// switch the sentinels may still make: a failover stuck "in progress" for
// the rig's 30 s has been seen to complete just after it gave up (a
// sentinel asked to fail over right after it resumed from a stop).
func (t *sentinelTopo) settleAfter(r *runner, tb testing.TB, err error) {
	if err != nil {
		_ = r.tryRig(tb, func(tb testing.TB) { t.s.WaitStable(tb) })
	}
}
