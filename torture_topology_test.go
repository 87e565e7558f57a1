//go:build full

package lockactor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/internal/torture"
)

// The topology variants of the torture suite: the same workload and
// checker on a Redis Cluster with replicas, a Sentinel group, and a master
// whose replica must confirm every grant, each with its own faults (see
// torture.ClusterTopology, SentinelTopology, ReplicaSyncTopology for what
// each injects and which checks they relax, and why). Each runs one random
// seed, short by default; LOCKACTOR_TORTURE and LOCKACTOR_TORTURE_SEED work
// as for TestTorture. Without redis-cli (Cluster) or redis-server they skip,
// or fail under LOCKACTOR_REQUIRE_REDIS=1.

// topologyWorkers is the topology runs' workers: fewer than the single-server
// run's, as the deployment's own processes share the machine.
const topologyWorkers = 16

func TestTortureCluster(t *testing.T) {
	runTopologyTorture(t, 10*time.Second, func(t *testing.T) torture.Topology {
		return torture.ClusterTopology(redistest.StartClusterReplicas(t, 3))
	})
}

func TestTortureSentinel(t *testing.T) {
	runTopologyTorture(t, 10*time.Second, func(t *testing.T) torture.Topology {
		return torture.SentinelTopology(redistest.StartSentinel(t))
	})
}

// TestTortureReplicaSync also fails a run whose replica stops were not all
// seen to refuse a grant: each stop (0.6-2 s, past the 300 ms WAIT) probes
// with a TryLock of its own, which must come back ErrNotReplicated (a grant
// is a violation). The workers' own refusals are counted too, but they
// cannot be required: Lock waits rather than refuse, and a short stop may
// catch no TryLock at all.
func TestTortureReplicaSync(t *testing.T) {
	res := runTopologyTorture(t, 10*time.Second, func(t *testing.T) torture.Topology {
		return torture.ReplicaSyncTopology(redistest.StartReplicated(t))
	})
	stops, refused := res.Figures.Faults["sigstop-replica"], res.Figures.Topology["stopped-replica probes refused: not replicated"]
	if refused != stops {
		t.Errorf("the replica was stopped %d times, and %d of the probes meanwhile were refused as not replicated", stops, refused)
	}
}

// strictWorkers are TestTortureSentinelStrict's goroutines: 6 on each of
// the 3 Clients its workload uses.
const strictWorkers = 18

// TestTortureSentinelStrict is the strict Sentinel torture
// (torture.SentinelStrictTopology): a master with two replicas and three
// sentinels; 3 Clients x 6 goroutines with WithReplicaSync(1, 500ms) and
// WithWatchdogTimeout(1500ms) taking Lock, TryLock, FairLock, FencedLock
// and the read-write views; SENTINEL FAILOVER (also with its new master
// stopped as it is named, or with one sentinel stopped), the master
// SIGSTOPped for 300-800ms, CLIENT KILL. torture.CheckStrict judges it without relaxing
// safety around failovers: each critical section counts until its Lost
// closed, a watchdog hold's Lost must close by the end its Client could
// compute, one Client's tokens never go back, and every name must be free
// soon after the run. A master switch explains an overlap only when the
// later grant followed the sentinels' naming a new master and one of the
// two holds, granted within a second of it, ended within a second (see
// CONTRIBUTING.md). It runs 15s, or LOCKACTOR_TORTURE's length.
func TestTortureSentinelStrict(t *testing.T) {
	runTopology(t, topologyRun{def: 15 * time.Second, workers: strictWorkers},
		func(t *testing.T) torture.Topology {
			return torture.SentinelStrictTopology(redistest.StartSentinelReplicas(t, 2))
		})
}

// topologyRun is how runTopology runs a variant: its default length and
// its workers.
type topologyRun struct {
	def     time.Duration
	workers int
}

// runTopologyTorture starts the deployment (skipping where its tools are
// missing), runs one seed for LOCKACTOR_TORTURE or def and reports it.
func runTopologyTorture(t *testing.T, def time.Duration, deploy func(*testing.T) torture.Topology) torture.Result {
	return runTopology(t, topologyRun{def: def, workers: topologyWorkers}, deploy)
}

// runTopology is runTopologyTorture as run says.
func runTopology(t *testing.T, run topologyRun, deploy func(*testing.T) torture.Topology) torture.Result {
	def := run.def
	if testing.Short() {
		t.Skip("a topology torture run takes half a minute; skipped with -short")
	}
	d := tortureLength(t, def)
	seed, ok := tortureSeed(t)
	if !ok {
		seed = time.Now().UnixNano()
	}
	replay := fmt.Sprintf("%s=%d %s=%v go test -race -tags full -run '^%s$' -count=1 -v .", tortureSeedEnv, seed, tortureEnv, d, t.Name())
	t.Logf("torture seed %d for %v; replay: %s", seed, d, replay)
	topo := deploy(t)
	res := torture.Run(t, torture.Config{Seed: seed, Duration: d, Topology: topo, OwnerOf: lockactor.OwnerOf, HoldField: lockactor.HoldField, MutexHolder: lockactor.MutexHolder,
		Workers: run.workers, Logf: func(format string, args ...any) { t.Logf("torture: "+format, args...) },
		DumpPath: tortureDump(t.Name(), seed),
		// As TestTorture: latch records outlived by the longest outages.
		Options: []lockactor.Option{lockactor.WithLatchKeep(2 * time.Second)}})
	reportTorture(t, seed, replay, res)
	return res
}
