package torture

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// replicaTopo is a master and one replica, every grant needing the
// replica's confirmation.
type replicaTopo struct{ pair *redistest.Replicated }

// replicaSyncTimeout is the variant's WithReplicaSync timeout.
const replicaSyncTimeout = 300 * time.Millisecond

// ReplicaSyncTopology runs the workload on pair's master (pair from
// StartReplicated) with WithReplicaSync(1, 300ms): every grant must be
// confirmed by the replica, or be refused (ErrNotReplicated) or retried.
// Right after each grant of a single-name lock, while its owner holds it,
// the replica is read on its own connection: the field must be there (see
// CheckReplicaGrants). The faults take the replica away so that grants
// must be refused: the replica SIGSTOPped for 0.6-2s (past the WAIT
// timeout, so that grants meanwhile cannot be confirmed; a probe of the
// rig's own checks that one is refused), killed and restarted
// (it resynchronises from empty: probes meanwhile are not judged), its
// replication link cut (CLIENT KILL TYPE replica); and the master
// SIGSTOPped for 200-800ms, CLIENT KILL of the master's connections, hook
// windows. Nothing here loses acknowledged writes: every other check is as
// strict as on a single server.
func ReplicaSyncTopology(pair *redistest.Replicated) Topology { return &replicaTopo{pair: pair} }

func (t *replicaTopo) name() string { return "replica-sync" }

func (t *replicaTopo) newClient(hook redis.Hook) redis.UniversalClient {
	rdb := redis.NewClient(&redis.Options{Addr: t.pair.Master().Addr()})
	if hook != nil {
		rdb.AddHook(hook)
	}
	return rdb
}

func (t *replicaTopo) options() []lockactor.Option {
	return []lockactor.Option{lockactor.WithReplicaSync(1, replicaSyncTimeout)}
}

func (t *replicaTopo) replica() *redistest.Server { return t.pair.Replica() }

func (t *replicaTopo) plan(seed int64, d time.Duration, clients map[string]int) []Planned {
	return planMenu(seed, d, clients, []menuItem{
		{FaultStopReplica, 3, 2 * replicaSyncTimeout, 2 * time.Second},
		{FaultRestartReplica, 1, time.Second, 2 * time.Second},
		{FaultKillLink, 2, 100 * time.Millisecond, 100 * time.Millisecond},
		{FaultStopMaster, 1, 200 * time.Millisecond, 800 * time.Millisecond},
		{FaultClientKill, 1, 100 * time.Millisecond, 100 * time.Millisecond},
		{FaultHook, 2, 500 * time.Millisecond, 2 * time.Second},
	}, nil)
}

func (t *replicaTopo) apply(r *runner, tb testing.TB, p Planned) {
	master, rep := t.pair.Master(), t.pair.Replica()
	f := Fault{Kind: p.Kind, Server: "replicated", Start: time.Now()}
	switch p.Kind {
	case FaultStopReplica:
		// A probe of the rig's own while the replica is stopped: the
		// workers' calls may all miss the window (Lock waits rather than
		// refuse), so the probe is what makes every stop test the refusal
		// (a stop lasts at least twice the WAIT timeout, see plan).
		var probe string
		f.Detail = r.sigstopWhile(tb, f.Start, rep, p.Dur, false, nil, func() { probe = t.probeStopped(r, p.Dur) })
		f.Detail += "; probe " + probe
	case FaultStopMaster:
		f.Detail = r.sigstop(tb, f.Start, master, p.Dur, true, nil)
	case FaultRestartReplica:
		rep.Kill(tb)
		rep.Restart(tb)
		t.pair.WaitSynced(tb)
		f.Detail = rep.Addr() + " restarted and resynchronised"
		r.topo.addFrozen(Interval{f.Start, time.Now()}, "replica restarted", nil)
	case FaultKillLink:
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n, err := r.admin["A"].Do(ctx, "client", "kill", "type", "replica").Int()
		cancel()
		f.Detail = fmt.Sprintf("%d replication link(s) cut (err %v)", n, err)
	case FaultClientKill:
		f.Detail = clientKill([]*redistest.Server{master})
	}
	f.End = time.Now()
	r.record(f)
}

// probeStopped runs while the replica is stopped: the setup Client
// (WithReplicaSync(1, replicaSyncTimeout), as the workers') tries a lock
// of a name of its own, which must be refused as not replicated. It
// reports what the probe got; a grant is a violation, as no replica could
// have confirmed it.
func (t *replicaTopo) probeStopped(r *runner, d time.Duration) string {
	name := fmt.Sprintf("rig.replica-probe.%d", r.ids.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	l := r.setup.Lock(name)
	ok, err := l.TryLock(ctx)
	switch {
	case ok:
		_ = l.Unlock(ctx)
		r.violate(VReplica, fmt.Sprintf("TryLock(%s) was granted while the replica was stopped", name))
		return "granted"
	case errors.Is(err, lockactor.ErrNotReplicated):
		r.topo.count(&r.topo.probesRefused)
		return "refused: not replicated"
	default:
		r.topo.count(&r.topo.probesFailed)
		return fmt.Sprintf("failed: %v", err)
	}
}
