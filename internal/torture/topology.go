package torture

import (
	"context"
	"errors"
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

// Topology is a deployment a run uses instead of two standalone servers (see
// Config.Topology): a Redis Cluster with replicas, a Sentinel group, or a
// master with a replica whose confirmation every grant needs. Every Client
// of the workload, those labelled "A" and "B" alike, talks to it, so
// MultiLocks span two Clients of one deployment. Make one with
// ClusterTopology, SentinelTopology, SentinelStrictTopology or
// ReplicaSyncTopology.
type Topology interface {
	// name is the variant's name in logs.
	name() string
	// newClient returns a fresh go-redis client of the deployment with hook
	// (if not nil) on every connection it makes, a Cluster's node clients
	// included: the runtime pipelines to those directly.
	newClient(hook redis.Hook) redis.UniversalClient
	// options are added to every workload Client's.
	options() []lockactor.Option
	// plan is the fault timeline of a run of length d.
	plan(seed int64, d time.Duration, clients map[string]int) []Planned
	// apply injects one planned fault of the topology's own kinds, records
	// it (runner.record) and any relaxation it calls for (topoState).
	apply(r *runner, tb testing.TB, p Planned)
	// replica is the server whose copy of every grant the replica-sync
	// check reads, or nil.
	replica() *redistest.Server
}

// The topology faults. Their numbers start well past the single-server
// kinds so that both lists can grow.
const (
	// FaultFailover is a graceful failover: CLUSTER FAILOVER to a master's
	// replica (lossless: the master waits for the replica to catch up), or
	// SENTINEL FAILOVER (not lossless: see SentinelTopology).
	FaultFailover FaultKind = 64 + iota
	// FaultCrash kills a master with SIGKILL, waits until its replica took
	// over, restarts it and waits until it replicates again.
	FaultCrash
	// FaultNodeDown kills a master and waits for the takeover; the node
	// stays down until the FaultNodeBack planned over a minute later
	// (longer than go-redis keeps a gone node's client).
	FaultNodeDown
	// FaultNodeBack restarts the node FaultNodeDown killed, waits until it
	// replicates, and makes it master again with a graceful failover.
	FaultNodeBack
	// FaultSlotMove reshards a workload name's slot to another master.
	FaultSlotMove
	// FaultMigrating leaves a workload name's slot MIGRATING/IMPORTING for
	// the fault's duration, then finishes the move.
	FaultMigrating
	// FaultStopMaster SIGSTOPs a master for less than the failure
	// detection time (no failover).
	FaultStopMaster
	// FaultStopReplica SIGSTOPs a replica.
	FaultStopReplica
	// FaultRestartReplica kills a replica and restarts it (it comes back
	// empty and resynchronises).
	FaultRestartReplica
	// FaultKillLink cuts the replication link (CLIENT KILL TYPE replica on
	// the master); the replica reconnects and resynchronises.
	FaultKillLink
	// FaultClientKill kills every normal and pub/sub connection on every
	// data node.
	FaultClientKill
	// FaultFailoverStopNew is a SENTINEL FAILOVER whose new master is
	// SIGSTOPped the moment the sentinels name it: the runtime's reads of
	// its holds there, and its check that the pool has followed, wait or
	// fail while it follows the switch (strict variant).
	FaultFailoverStopNew
	// FaultFailoverSentinelStopped is a SENTINEL FAILOVER made while one
	// of the three sentinels (drawn by the fault's seed) is SIGSTOPped, and
	// stays so for the fault's duration after the promotion. A Client whose
	// go-redis asks that sentinel hears of the switch only from the
	// others (the runtime's own watch of every sentinel) until it resumes,
	// and then, for a moment, the stopped one's stale word naming the
	// former master.
	FaultFailoverSentinelStopped
	// FaultUnplanned is not injected: a master switch the sentinels made
	// on their own (a loaded machine can keep a master from answering
	// them for down-after), recorded after the run (unplannedSwitches).
	FaultUnplanned
	// FaultQuietFailover is a SENTINEL FAILOVER the rig records as a fault
	// but opens no Unsafe window for: the switch watch must find it, as it
	// finds a switch the sentinels make on their own (unplannedSwitches).
	FaultQuietFailover
)

var topoFaultNames = map[FaultKind]string{
	FaultFailover: "failover", FaultCrash: "crash-failover", FaultNodeDown: "node-down", FaultNodeBack: "node-back",
	FaultSlotMove: "slot-move", FaultMigrating: "slot-migrating", FaultStopMaster: "sigstop-master",
	FaultStopReplica: "sigstop-replica", FaultRestartReplica: "replica-restart", FaultKillLink: "client-kill-replica-link",
	FaultClientKill: "client-kill-all", FaultFailoverStopNew: "failover-stop-new",
	FaultFailoverSentinelStopped: "failover-sentinel-stopped", FaultUnplanned: "unplanned-switch",
	FaultQuietFailover: "quiet-failover",
}

// topoSettle is how long after a failover ends a Client may still send to
// the old master (go-redis learns of the switch from the sentinels' or the
// cluster's messages, and requests already sent run there).
const topoSettle = 2 * time.Second

// topoFairWait is the topology Clients' FairLock wait timeout: a failover
// that loses a fair_cancel leaves a waiter's entry in the queue, and with Redisson's 5 minutes nobody could take that fair
// lock for the rest of the run.
const topoFairWait = 3 * time.Second

// topoState is what a Topology run adds to the runner: the relaxations its
// faults called for, the replica probes, and counters for the figures.
type topoState struct {
	mu      sync.Mutex
	rx      Relaxations
	replica redis.UniversalClient // unhooked, to the replica (replica-sync variant)
	settled int                   // fair queues settled after unsafe windows
	// rigFailures are faults the deployment did not complete (tryRig).
	rigFailures int
	// probesRefused and probesFailed count the replica-sync variant's
	// probes while its replica is stopped (replicaTopo.probeStopped).
	probesRefused, probesFailed int
	// sent and replies are what the hooks saw of replica sync (see
	// SyncTally, RenewReply), for the strict variant.
	sent    SyncTally
	replies []RenewReply
}

// count adds one to n, one of t's counters.
func (t *topoState) count(n *int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	*n++
}

// onRenewReply records a renewal the hook saw answered 1.
func (t *topoState) onRenewReply(rr RenewReply) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replies = append(t.replies, rr)
}

// renewReplies returns a copy of the replies recorded so far.
func (t *topoState) renewReplies() []RenewReply {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.replies)
}

// addUnsafe records a window in which acknowledged writes to the resources
// in may have been lost (nil: every resource).
func (t *topoState) addUnsafe(iv Interval, why string, in func(res string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rx.Unsafe = append(t.rx.Unsafe, Window{Interval: iv, Why: why, In: in})
}

// addFrozen records a window in which a server was stopped or empty, so a
// read right after a grant may not find it (its TTL ran on, or the server
// was resynchronising): probes overlapping it are not judged.
func (t *topoState) addFrozen(iv Interval, why string, in func(res string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rx.Frozen = append(t.rx.Frozen, Window{Interval: iv, Why: why, In: in})
}

// lossy reports whether an Unsafe window so far covers res.
func (t *topoState) lossy(res string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range t.rx.Unsafe {
		if w.covers(res) {
			return true
		}
	}
	return false
}

func (t *topoState) relax() Relaxations {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rx
}

// probeReplica reads, on the unhooked replica connection, whether the
// replica has the hold its owner was just granted (see CheckReplicaGrants).
// Only single-name lock holds, as for the master probe (steps.go probe).
func (t *topoState) probeReplica(oh *openHold, h Hold) {
	if t.replica == nil {
		return
	}
	switch h.Prim {
	case PrimLock, PrimFenced, PrimFair, PrimRead, PrimWrite:
	default:
		return
	}
	_, name, _ := strings.Cut(h.Res, "/")
	ctx, cancel := context.WithTimeout(context.Background(), replicaProbeTimeout)
	defer cancel()
	p := ReplicaProbe{Hold: oh.id, At: time.Now()}
	has, err := t.replica.HExists(ctx, name, h.Field()).Result()
	p.Back, p.Answered, p.Gone = time.Now(), err == nil, err == nil && !has
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rx.Probes = append(t.rx.Probes, p)
}

// replicaProbeTimeout bounds one replica probe (a stopped replica gives no
// answer, and no judgement).
const replicaProbeTimeout = 300 * time.Millisecond

// connectTopology makes the admin clients, the setup Client and the hooked
// Clients on cfg.Topology, as connect does on two servers.
func (r *runner) connectTopology() {
	t := r.cfg.Topology
	r.admin = map[string]redis.UniversalClient{"A": t.newClient(nil), "B": t.newClient(nil)}
	if rep := t.replica(); rep != nil {
		rc := redis.NewClient(&redis.Options{Addr: rep.Addr(), MaxRetries: -1, ReadTimeout: replicaProbeTimeout})
		r.admin["replica"], r.topo.replica = rc, rc
	}
	r.connectClients(" on "+t.name(), t.options(), func(_ string, h *Hook) redis.UniversalClient { return t.newClient(h) })
}

// applyTopology injects p if it is a topology fault; false otherwise (the
// hook and block windows are applied as in single-server runs).
func (r *runner) applyTopology(tb testing.TB, p Planned) bool {
	if r.cfg.Topology == nil || p.Kind < FaultFailover {
		return false
	}
	r.cfg.Topology.apply(r, tb, p)
	return true
}

// lossy runs a fault that may lose acknowledged writes: semaphore calls that
// overlap it do not give their permits back (the epoch is odd, see semStep),
// and a fresh generation of semaphore names follows it, as for a restart.
func (r *runner) lossy(f func()) {
	r.epoch.Add(1)
	defer r.epoch.Add(1)
	defer func() { r.newGeneration(r.gen.Load() + 1) }()
	f()
}

// settleFairQueues: once every worker stopped, a run that had unsafe
// windows may have lost a cancelled waiter's removal from a fair queue.
// Such an entry is only skipped once its wait
// timeout passed, and only by the next fair_lock script: this waits out
// topoFairWait and makes one TryLock (and Unlock) on each fair name whose
// queue is not empty, as the next user would. checkFairQueues then checks
// that the queues drained. Runs without unsafe windows are left alone, so a
// ghost entry there is still reported.
func (r *runner) settleFairQueues() {
	if len(r.topo.relax().Unsafe) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), topoFairWait+5*time.Second)
	defer cancel()
	time.Sleep(topoFairWait + 500*time.Millisecond)
	for _, name := range fairNames() {
		if n, err := r.admin["A"].LLen(ctx, redisio.FairQueue(name)).Result(); err != nil || n == 0 {
			continue
		}
		r.topo.mu.Lock()
		r.topo.settled++
		r.topo.mu.Unlock()
		l := r.setup.FairLock(name)
		if ok, err := l.TryLock(ctx); ok && err == nil {
			_ = l.Unlock(ctx)
		}
	}
}

// workloadNames are the names the workers use on "A" and "B" (semaphores
// aside, whose names change by generation): faults pick their targets among
// them.
func workloadNames() []string {
	return namesOf("lock", "fair", "fenced", "rw", "mla", "mlb", "shared", "mutex")
}

// targetRNG is the random stream a planned topology fault picks its
// targets with.
func targetRNG(p Planned) *rand.Rand { return rand.New(rand.NewPCG(p.Seed, 3)) }

// sigstop stops s for d and returns the fault's detail. A stopped master
// (master) is a Frozen window, from the fault's start, for the resources
// in (nil: all): its keys' TTLs ran on meanwhile.
func (r *runner) sigstop(tb testing.TB, start time.Time, s *redistest.Server, d time.Duration, master bool, in func(string) bool) string {
	return r.sigstopWhile(tb, start, s, d, master, in, nil)
}

// sigstopWhile is sigstop that runs during (when not nil) as soon as s is
// stopped; s stays stopped for d in all.
func (r *runner) sigstopWhile(tb testing.TB, start time.Time, s *redistest.Server, d time.Duration, master bool, in func(string) bool, during func()) string {
	s.Pause(tb)
	paused := time.Now()
	if during != nil {
		during()
	}
	time.Sleep(d - time.Since(paused))
	s.Resume(tb)
	if master {
		r.topo.addFrozen(Interval{start, time.Now()}, "master stopped", in)
	}
	return fmt.Sprintf("%s for %v", s.Addr(), d)
}

// figures counts what the topology run did besides the common figures.
func (t *topoState) figures(l *Log) map[string]int {
	rx := t.relax()
	m := map[string]int{"unsafe windows": len(rx.Unsafe), "frozen windows": len(rx.Frozen)}
	spans := SafeSpans(l)
	cut := rx.Cut(spans)
	for i, s := range spans {
		switch c := cut[i]; {
		case c.By == ByRestart && s.By != ByRestart && c.Empty() && !s.Empty():
			m["holds left out (granted in an unsafe window)"]++
		case c.By == ByRestart && s.By != ByRestart:
			m["holds cut at an unsafe window"]++
		}
	}
	notReplicated := lockactor.ErrNotReplicated.Error()
	for i := range l.Calls {
		if strings.Contains(l.Calls[i].Err, notReplicated) {
			m["calls refused: not replicated"]++
		}
	}
	for _, p := range rx.Probes {
		switch {
		case !p.Answered:
			m["replica probes unanswered"]++
		case p.Gone:
			m["replica probes missing the grant"]++
		default:
			m["replica probes holding the grant"]++
		}
	}
	t.mu.Lock()
	m["fair queues settled after unsafe windows"] = t.settled
	m["rig failures (fault not completed, run went on)"] = t.rigFailures
	if t.replica != nil {
		m["stopped-replica probes refused: not replicated"] = t.probesRefused
		m["stopped-replica probes failed otherwise"] = t.probesFailed
	}
	t.mu.Unlock()
	return m
}

// rigTB turns a rig's Fatalf into a panic that tryRig recovers: a failover
// or slot move the deployment did not complete (SENTINEL FAILOVER accepted
// and then abandoned by the sentinels, say) is recorded, with its window
// relaxed, instead of ending the run's fault injection (bgTB).
type rigTB struct{ testing.TB }

type rigFailure struct{ msg string }

func (t rigTB) Helper() {}

func (t rigTB) Fatalf(format string, args ...any) { panic(rigFailure{fmt.Sprintf(format, args...)}) }

func (t rigTB) Fatal(args ...any) { panic(rigFailure{fmt.Sprint(args...)}) }

// tryRig runs f with a rigTB and returns the failure it reported, if any;
// it counts the failure for the figures.
func (r *runner) tryRig(tb testing.TB, f func(testing.TB)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			rf, ok := p.(rigFailure)
			if !ok {
				panic(p)
			}
			err = errors.New(rf.msg)
			r.topo.mu.Lock()
			r.topo.rigFailures++
			r.topo.mu.Unlock()
			r.logf("rig failure (the fault is recorded, the run goes on): %v", err)
		}
	}()
	f(rigTB{tb})
	return nil
}
