package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

// clusterTopo is a Redis Cluster of masters with one replica each.
type clusterTopo struct {
	cl *redistest.Cluster

	mu   sync.Mutex
	down *redistest.Server // killed by FaultNodeDown, until FaultNodeBack
	// downSlots are the slots the down node served when it was killed.
	downSlots slotSet
}

// ClusterTopology runs the workload on cl (from StartClusterReplicas), with
// the runtime's default options (replica sync: WAIT for every connected
// replica). Its faults:
//
//   - graceful failovers (CLUSTER FAILOVER), slot moves, and slots left
//     MIGRATING for 0.3-1.5s: Redis loses nothing, so every check stays
//     strict across them;
//   - masters SIGSTOPped for less than the node timeout (strict; ghost
//     probes of their names during the stop are not judged);
//   - crash failovers: a master killed, its replica takes over, the node
//     restarts as a replica. Writes the replica had not received are lost,
//     renewals were not confirmed: the window from the kill to the takeover
//     plus topoSettle is Unsafe for the names on that master's slots;
//   - in runs of 3 minutes or more, one master down for 70s, longer than
//     go-redis keeps a gone node's client, then back, and made master again
//     (a Client must use the node's new client);
//   - CLIENT KILL of every connection on every node, and hook windows;
//   - SPUBLISH and PUBLISH refused by every node for 1-4s (an ACL rule on
//     the default user), strict: every script publishes after its writes,
//     and a refused publish must change nothing else.
func ClusterTopology(cl *redistest.Cluster) Topology { return &clusterTopo{cl: cl} }

func (c *clusterTopo) name() string { return "cluster" }

func (c *clusterTopo) newClient(hook redis.Hook) redis.UniversalClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.cl.Addrs()})
	if hook != nil {
		rdb.OnNewNode(func(n *redis.Client) { n.AddHook(hook) })
	}
	return rdb
}

func (c *clusterTopo) options() []lockactor.Option {
	return []lockactor.Option{lockactor.WithFairLockWaitTimeout(topoFairWait)}
}

func (c *clusterTopo) replica() *redistest.Server { return nil }

// allNodes is every node, for faults applied to each (FaultDenyPublish).
func (c *clusterTopo) allNodes() []*redistest.Server { return c.cl.Nodes() }

// nodeDownFor is how long FaultNodeDown keeps its node down: past the
// minute after which go-redis closes a gone node's client.
const nodeDownFor = 70 * time.Second

func (c *clusterTopo) plan(seed int64, d time.Duration, clients map[string]int) []Planned {
	menu := []menuItem{
		{FaultFailover, 2, time.Second, 2 * time.Second},
		{FaultSlotMove, 2, 300 * time.Millisecond, 600 * time.Millisecond},
		{FaultMigrating, 2, 300 * time.Millisecond, 1500 * time.Millisecond},
		{FaultStopMaster, 1, 200 * time.Millisecond, 800 * time.Millisecond},
		{FaultClientKill, 1, 100 * time.Millisecond, 100 * time.Millisecond},
		{FaultHook, 1, 500 * time.Millisecond, 2 * time.Second},
		{FaultDenyPublish, 1, time.Second, 4 * time.Second},
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x646f776e))
	// A short run gets one crash failover, half-way; a long one has them
	// in every bag, and one node down for longer than a minute.
	fixed := []Planned{{At: d / 2, Kind: FaultCrash, Server: "A", Dur: 7 * time.Second, Seed: rng.Uint64()}}
	if d >= 3*time.Minute {
		menu = append(menu, menuItem{FaultCrash, 1, 6 * time.Second, 8 * time.Second})
		at := d / 4
		fixed = []Planned{
			{At: at, Kind: FaultNodeDown, Server: "A", Dur: 5 * time.Second, Seed: rng.Uint64()},
			{At: at + nodeDownFor, Kind: FaultNodeBack, Server: "A", Dur: 10 * time.Second, Seed: rng.Uint64()},
		}
	}
	return planMenu(seed, d, clients, menu, fixed)
}

func (c *clusterTopo) apply(r *runner, tb testing.TB, p Planned) {
	rng := targetRNG(p)
	f := Fault{Kind: p.Kind, Server: "cluster", Start: time.Now()}
	c.mu.Lock()
	down := c.down != nil
	c.mu.Unlock()
	switch p.Kind {
	case FaultFailover, FaultSlotMove, FaultMigrating:
		if down {
			// The rig's failover and slot moves wait until every node
			// reports the cluster ok, which a down node never does.
			f.Detail = "skipped: a node is down"
			break
		}
		if p.Kind != FaultFailover {
			f.Detail = c.move(r, tb, p, rng)
			break
		}
		m := c.masterWithReplica(rng)
		if m == nil {
			f.Detail = "skipped: no master with a replica"
			break
		}
		key := c.keyOn(m, rng)
		var to *redistest.Server
		if err := r.tryRig(tb, func(tb testing.TB) { to = c.cl.Failover(tb, key) }); err != nil {
			// CLUSTER FAILOVER is lossless whether or not it completed:
			// nothing is relaxed.
			f.Detail = fmt.Sprintf("%s (slot of %q): rig: %v", m.Addr(), key, err)
			break
		}
		f.Detail = fmt.Sprintf("%s -> %s (slot of %q)", m.Addr(), to.Addr(), key)
	case FaultCrash, FaultNodeDown:
		f.Detail = c.crash(r, tb, p, rng)
	case FaultNodeBack:
		f.Detail = c.back(r, tb)
	case FaultStopMaster:
		ms := c.cl.Masters()
		if len(ms) == 0 {
			f.Detail = "skipped: no master answers"
			break
		}
		m := ms[rng.IntN(len(ms))]
		f.Detail = r.sigstop(tb, f.Start, m, p.Dur, true, c.slotSet(m).holds)
	case FaultClientKill:
		f.Detail = clientKill(c.cl.Nodes())
	}
	f.End = time.Now()
	r.record(f)
}

// move reshards a workload name's slot to another master, at once or after
// leaving it half-moved for p.Dur.
func (c *clusterTopo) move(r *runner, tb testing.TB, p Planned, rng *rand.Rand) string {
	names := workloadNames()
	name := names[rng.IntN(len(names))]
	from := c.cl.MasterFor(name)
	var others []*redistest.Server
	for _, m := range c.cl.Masters() {
		if m != from {
			others = append(others, m)
		}
	}
	if from == nil || len(others) == 0 {
		return fmt.Sprintf("skipped: %q has no master, or no other master", name)
	}
	to := others[rng.IntN(len(others))]
	if p.Kind == FaultSlotMove {
		err := r.tryRig(tb, func(tb testing.TB) { c.cl.MoveSlot(tb, name, to) })
		return fmt.Sprintf("slot of %q %s -> %s (rig: %v)", name, from.Addr(), to.Addr(), err)
	}
	var finish func() error
	if err := r.tryRig(tb, func(tb testing.TB) { finish = c.cl.BeginSlotMove(tb, name, to) }); err != nil {
		return fmt.Sprintf("slot of %q %s -> %s not begun (rig: %v)", name, from.Addr(), to.Addr(), err)
	}
	time.Sleep(p.Dur)
	if err := finish(); err != nil {
		r.violate(VWorkload, fmt.Sprintf("fault injection: finishing the move of %q's slot: %v", name, err))
	}
	return fmt.Sprintf("slot of %q %s -> %s, migrating for %v", name, from.Addr(), to.Addr(), p.Dur)
}

// crash kills a master that has a replica and waits for the takeover; a
// FaultCrash restarts it after 1-3s and waits until it replicates, a
// FaultNodeDown leaves it down for FaultNodeBack. The kill-to-takeover
// window (plus topoSettle) is Unsafe for the names on its slots.
func (c *clusterTopo) crash(r *runner, tb testing.TB, p Planned, rng *rand.Rand) string {
	c.mu.Lock()
	busy := c.down != nil
	c.mu.Unlock()
	if busy {
		// One node down at a time: with two, a master without a replica
		// could be picked, and its slots would go uncovered.
		return "skipped: a node is already down"
	}
	m := c.masterWithReplica(rng)
	if m == nil {
		return "skipped: no master with a replica"
	}
	rep := c.cl.ReplicaOf(m)
	slots := c.slotSet(m)
	in := slots.holds
	detail := ""
	r.lossy(func() {
		start := time.Now()
		m.Kill(tb)
		c.waitTakeover(r, m, rep)
		r.topo.addUnsafe(Interval{start, time.Now().Add(topoSettle)}, "master "+m.Addr()+" killed", in)
		detail = fmt.Sprintf("%s killed, %s took over its %d slots in %v", m.Addr(), rep.Addr(), slots.len(), time.Since(start).Round(time.Millisecond))
		if p.Kind == FaultNodeDown {
			c.mu.Lock()
			c.down, c.downSlots = m, slots
			c.mu.Unlock()
			return
		}
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		c.rejoin(tb, m)
	})
	return detail
}

// back restarts the node FaultNodeDown killed and makes it master again.
func (c *clusterTopo) back(r *runner, tb testing.TB) string {
	c.mu.Lock()
	m, slots := c.down, c.downSlots
	c.down, c.downSlots = nil, nil
	c.mu.Unlock()
	if m == nil {
		return "skipped: no node down"
	}
	x := c.rejoin(tb, m)
	if x == nil {
		return fmt.Sprintf("%s back, but not replicating (%d slots when killed)", m.Addr(), slots.len())
	}
	// The master it replicates now, whatever slots moved meanwhile.
	key := keyIn(c.slotSet(x))
	var to *redistest.Server
	if err := r.tryRig(tb, func(tb testing.TB) { to = c.cl.Failover(tb, key) }); err != nil {
		return fmt.Sprintf("%s back; failover of the slot of %q from %s: rig: %v", m.Addr(), key, x.Addr(), err)
	}
	return fmt.Sprintf("%s back; failover of the slot of %q from %s made %s master again", m.Addr(), key, x.Addr(), to.Addr())
}

// takeoverWait bounds a replica's takeover of a killed master (node timeout
// 2s, then the election) and a restarted node's rejoining.
const takeoverWait = 20 * time.Second

// waitTakeover waits until rep serves slots and m is no longer a serving
// master; a workload violation if it does not happen in takeoverWait.
func (c *clusterTopo) waitTakeover(r *runner, m, rep *redistest.Server) {
	deadline := time.Now().Add(takeoverWait)
	for time.Now().Before(deadline) {
		ms := c.cl.Masters()
		if slices.Contains(ms, rep) && !slices.Contains(ms, m) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.violate(VWorkload, fmt.Sprintf("fault injection: %s did not take over from %s within %v", rep.Addr(), m.Addr(), takeoverWait))
}

// rejoin restarts m, waits until it replicates a master and the cluster is
// ok, and returns that master (nil, and an error through tb, if it does
// not rejoin within takeoverWait).
func (c *clusterTopo) rejoin(tb testing.TB, m *redistest.Server) *redistest.Server {
	m.Restart(tb)
	deadline := time.Now().Add(takeoverWait)
	for time.Now().Before(deadline) {
		for _, x := range c.cl.Masters() {
			if c.cl.ReplicaOf(x) == m {
				c.cl.WaitOK(tb)
				return x
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Errorf("torture: %s did not rejoin as a replica within %v", m.Addr(), takeoverWait)
	return nil
}

// masterWithReplica picks a serving master that has a replica, or nil.
func (c *clusterTopo) masterWithReplica(rng *rand.Rand) *redistest.Server {
	var ok []*redistest.Server
	for _, m := range c.cl.Masters() {
		if c.cl.ReplicaOf(m) != nil {
			ok = append(ok, m)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	return ok[rng.IntN(len(ok))]
}

// keyOn is a workload name on m's slots if there is one, else some key
// there.
func (c *clusterTopo) keyOn(m *redistest.Server, rng *rand.Rand) string {
	slots := c.slotSet(m)
	names := workloadNames()
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, n := range names {
		if slots[redisio.SlotOf(n)] {
			return n
		}
	}
	return keyIn(slots)
}

// slotSet is a set of hash slots (16 KB, where a map of a third of the
// slots took some 200 KB, kept by every window until the run ends).
type slotSet []bool

// holds reports whether resource res ("<server>/<key>") lives on one of
// the set's slots.
func (s slotSet) holds(res string) bool {
	_, name, _ := strings.Cut(res, "/")
	return s[redisio.SlotOf(name)]
}

// slotSet is the set of slots CLUSTER SLOTS says m serves.
func (c *clusterTopo) slotSet(m *redistest.Server) slotSet {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer rc.Close()
	// CLUSTER SLOTS, deprecated for CLUSTER SHARDS, is what go-redis's
	// ClusterClient routes by (v9.23 osscluster.go), so the slots found
	// here are those the Clients under test send to m.
	//lint:ignore SA1019 the same slot map go-redis routes by, on purpose.
	ranges, err := rc.ClusterSlots(ctx).Result()
	out := make(slotSet, 16384)
	if err != nil {
		return out
	}
	port := fmt.Sprintf(":%d", m.Port())
	for _, rg := range ranges {
		if len(rg.Nodes) > 0 && strings.HasSuffix(rg.Nodes[0].Addr, port) {
			for s := rg.Start; s <= rg.End; s++ {
				out[int(s)] = true
			}
		}
	}
	return out
}

// keyIn is a key whose slot is in slots ("" if slots is empty).
func keyIn(slots slotSet) string {
	if slots.len() == 0 {
		return ""
	}
	for i := 0; ; i++ {
		if k := fmt.Sprintf("torture-key-%d", i); slots[redisio.SlotOf(k)] {
			return k
		}
	}
}

// len is how many slots the set has.
func (s slotSet) len() int {
	n := 0
	for _, in := range s {
		if in {
			n++
		}
	}
	return n
}
