//go:build full

package lockactor_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestSentinelLaggingClientAfterTheFormerMasterIsAReplica: go-redis's
// FailoverClusterClient reloads its slot map when its sentinel announces
// +switch-master; if that sentinel was stopped (SIGSTOP) through a
// failover, the map stays on the former master, which the sentinels have
// made a replica of the new one by then. Its writes there fail (READONLY),
// and a script that writes nothing reads a stale copy. (A FailoverClient
// moves on by itself here: go-redis learns the other sentinels and asks
// them when its own does not answer; TestSentinelWritesFollowTheFirstSentinel
// covers its pool before the former master is re-pointed.) A Client made
// over it must go on locking on the new master, while that sentinel is
// stopped and for a while after it resumes: every Lock granted there, every
// Unlock answered nil, and a hold taken before the failover kept. Before
// the runtime routed a FailoverClusterClient's commands, Lock failed with
// READONLY there.
func TestSentinelLaggingClientAfterTheFormerMasterIsAReplica(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinel(t)
	old := sen.WaitStable(t)
	want := sen.Replica()
	addrs := sen.Addrs()
	// The go-redis client asks the third sentinel only.
	rdb := redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: sen.MasterName(), SentinelAddrs: addrs[len(addrs)-1:]})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, lockactor.WithWatchdogTimeout(3*time.Second))
	ctx := ctxFor(t, 90*time.Second)

	keep := c.Lock("stale-keep") // the runtime watches the master while it has locks
	if err := keep.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = keep.Unlock(context.Background()) }()
	resume := failOverPastTheLastSentinel(t, ctx, sen)
	defer resume()
	oldc := old.Client(t)
	within(t, 20*time.Second, "the former master replicating the new one", func() bool {
		role, err := oldc.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "slave"
	})
	// The go-redis client itself still writes to the former master:
	// its sentinel is stopped and never told it of the switch.
	if role, err := rdb.Do(ctx, "ROLE").Slice(); err != nil || len(role) == 0 || role[0] != "slave" {
		t.Fatalf("the go-redis client's own ROLE: %v, %v; want the former master's (slave): the window this test is for was missed", role, err)
	}

	newc := want.Client(t)
	probes := 0
	probeFor := func(phase string, d time.Duration) {
		from := time.Now()
		for time.Since(from) < d {
			probe := c.Lock("stale-probe")
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := probe.Lock(pctx)
			cancel()
			if err != nil {
				t.Fatalf("Lock %v %s: %v", time.Since(from).Round(time.Millisecond), phase, err)
			}
			if n, err := newc.HGet(ctx, "stale-probe", lockactor.OwnerOf(probe)).Int(); err != nil || n != 1 {
				t.Fatalf("a lock granted %v %s is not on the new master (%d, %v)", time.Since(from).Round(time.Millisecond), phase, n, err)
			}
			if err := probe.Unlock(ctx); err != nil {
				t.Fatalf("Unlock %v %s: %v", time.Since(from).Round(time.Millisecond), phase, err)
			}
			probes++
			time.Sleep(20 * time.Millisecond)
		}
	}
	probeFor("with the client's sentinel stopped", 2*time.Second)
	resume()
	probeFor("after the client's sentinel resumed", 3*time.Second)
	t.Logf("%d probes", probes)
	select {
	case <-keep.Lost():
		t.Fatal("a hold taken before the failover was lost across it")
	default:
	}
}
