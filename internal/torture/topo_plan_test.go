package torture

import (
	"testing"
	"time"
)

// TestTopologyPlans: every topology's timeline is sorted, leaves the quiet
// tail alone, and has the faults its variant promises (a short run one
// failover of each kind where the variant has them; a long Cluster run its
// node down for over a minute and back).
func TestTopologyPlans(t *testing.T) {
	clients := map[string]int{"A": clientsA, "B": clientsB}
	for _, tt := range []struct {
		topo Topology
		d    time.Duration
		want []FaultKind
	}{
		{&clusterTopo{}, 25 * time.Second, []FaultKind{FaultCrash}},
		{&clusterTopo{}, 10 * time.Minute, []FaultKind{FaultCrash, FaultFailover, FaultSlotMove, FaultMigrating, FaultStopMaster, FaultClientKill, FaultHook, FaultNodeDown, FaultNodeBack}},
		{&sentinelTopo{}, 25 * time.Second, []FaultKind{FaultFailover, FaultCrash}},
		{&sentinelTopo{}, 10 * time.Minute, []FaultKind{FaultFailover, FaultCrash, FaultStopMaster, FaultStopReplica, FaultClientKill, FaultHook, FaultQuietFailover}},
		{&replicaTopo{}, 20 * time.Second, []FaultKind{FaultStopReplica}},
		{&replicaTopo{}, 10 * time.Minute, []FaultKind{FaultStopReplica, FaultRestartReplica, FaultKillLink, FaultStopMaster, FaultClientKill, FaultHook}},
	} {
		for _, seed := range []int64{1, 2, 3} {
			p := tt.topo.plan(seed, tt.d, clients)
			seen := map[FaultKind]int{}
			for i, f := range p {
				seen[f.Kind]++
				if i > 0 && f.At < p[i-1].At {
					t.Errorf("%s %v seed %d: fault %d at %v before %v", tt.topo.name(), tt.d, seed, i, f.At, p[i-1].At)
				}
				if f.At >= tt.d-quietTail {
					t.Errorf("%s %v seed %d: %s at %v, in the quiet tail", tt.topo.name(), tt.d, seed, f.Kind, f.At)
				}
			}
			for _, k := range tt.want {
				if seen[k] == 0 {
					t.Errorf("%s %v seed %d: no %s in %v", tt.topo.name(), tt.d, seed, k, p)
				}
			}
			if seed == 1 {
				t.Logf("%s %v: %d faults %v", tt.topo.name(), tt.d, len(p), seen)
			}
		}
	}
}

// TestTryRig: a rig's Fatalf inside tryRig is an error and a count, not the
// end of the injector's goroutine; anything else it panics with goes on.
func TestTryRig(t *testing.T) {
	r := &runner{tb: t}
	if err := r.tryRig(t, func(tb testing.TB) { tb.Fatalf("no promotion after %v", time.Second) }); err == nil || err.Error() != "no promotion after 1s" {
		t.Fatalf("tryRig = %v", err)
	}
	if err := r.tryRig(t, func(testing.TB) {}); err != nil {
		t.Fatal(err)
	}
	if r.topo.rigFailures != 1 {
		t.Fatalf("rigFailures = %d, want 1", r.topo.rigFailures)
	}
	defer func() {
		if p := recover(); p != "other" {
			t.Fatalf("recovered %v, want the panic to go on", p)
		}
	}()
	_ = r.tryRig(t, func(testing.TB) { panic("other") })
}
