//go:build full

package lockactor_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestSentinelWritesFollowTheFirstSentinel: go-redis's FailoverClient asks
// one sentinel where the master is and moves its pool when that sentinel
// announces +switch-master; if that sentinel is late (it learns of a
// failover another one made through hellos) or unreachable, the pool stays
// on the former master, which takes writes until the sentinels re-point
// it, and a grant written there is gone once they do. A Client whose
// go-redis client asks the third sentinel, stopped (SIGSTOP) during a
// failover the first one makes: a lock taken 200 ms after the first
// sentinel names the new master must be on the new master, not on the
// former one, and a hold taken before the failover must survive it (its
// renewals go to the new master too), still there. The clients the Client
// makes of one server are handed to WithServerClients, and the pipelines
// sent to the new master are seen by a hook put on them there.
func TestSentinelWritesFollowTheFirstSentinel(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinel(t)
	old := sen.WaitStable(t)
	want := sen.Replica()
	addrs := sen.Addrs()
	rdb := sen.FailoverClient(t, func(o *redis.FailoverOptions) { o.SentinelAddrs = addrs[len(addrs)-1:] })
	const watchdog = 3 * time.Second
	// The clients the Client makes of one server carry a hook that counts
	// their pipelines: the probe's grant goes through one of them.
	var made, piped atomic.Int64
	c := newClient(t, rdb, lockactor.WithWatchdogTimeout(watchdog), lockactor.WithServerClients(func(d *redis.Client) {
		made.Add(1)
		d.AddHook(pipeCount{&piped})
	}))
	ctx := ctxFor(t, 60*time.Second)

	keep := c.Lock("lag-keep")
	if err := keep.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	resume := failOverPastTheLastSentinel(t, ctx, sen)
	defer resume()
	named := time.Now()
	time.Sleep(200 * time.Millisecond)

	probe := c.Lock("lag-probe")
	if err := probe.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	onNew := want.Client(t).Exists(ctx, "lag-probe").Val()
	onOld := old.Client(t).Exists(ctx, "lag-probe").Val()
	if err := probe.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the probe: %v", err)
	}
	resume()
	if onNew != 1 || onOld != 0 {
		t.Fatalf("a lock taken %v after the first sentinel named %s is on the new master: %v, on the former %s: %v; want on the new one only",
			time.Since(named).Round(time.Millisecond), want.Addr(), onNew == 1, old.Addr(), onOld == 1)
	}

	if made.Load() == 0 || piped.Load() == 0 {
		t.Errorf("WithServerClients: %d clients made, %d pipelines through them; want both above 0", made.Load(), piped.Load())
	}

	select {
	case <-keep.Lost():
		t.Fatal("a hold taken before the failover was lost across it")
	case <-time.After(2 * watchdog):
	}
	field := lockactor.OwnerOf(keep)
	if n, err := want.Client(t).HGet(ctx, "lag-keep", field).Int(); err != nil || n != 1 {
		t.Fatalf("the new master's hash has %s = %d, %v; want the hold", field, n, err)
	}
	if err := keep.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// failOverPastTheLastSentinel has the first sentinel fail the group over
// to its replica while the last one (the one the test's go-redis client
// asks) is stopped (SIGSTOP), and returns once the first names the
// replica. It waits first until the runtime listens to the first sentinel
// (it hears of it from its hellos, every 2 s, and subscribes there to the
// failover's steps: five channels). resume resumes the stopped sentinel,
// once; later calls do nothing.
func failOverPastTheLastSentinel(t *testing.T, ctx context.Context, sen *redistest.Sentinel) (resume func()) {
	t.Helper()
	addrs := sen.Addrs()
	first := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer first.Close()
	within(t, 15*time.Second, "the runtime listening to the first sentinel", func() bool {
		list, err := first.ClientList(ctx).Result()
		return err == nil && strings.Contains(list, " sub=5 ")
	})
	lagging := sen.Sentinels()[len(addrs)-1]
	lagging.Pause(t)
	resumed := false
	resume = func() {
		if !resumed {
			resumed = true
			lagging.Resume(t)
		}
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: addrs[0]})
	defer sc.Close()
	within(t, 20*time.Second, "SENTINEL FAILOVER accepted", func() bool { return sc.Failover(ctx, sen.MasterName()).Err() == nil })
	want := sen.Replica().Addr()
	within(t, 20*time.Second, "the first sentinel naming the replica", func() bool {
		a, err := sc.GetMasterAddrByName(ctx, sen.MasterName()).Result()
		return err == nil && len(a) == 2 && net.JoinHostPort(a[0], a[1]) == want
	})
	return resume
}

// pipeCount is a go-redis hook that counts the pipelines sent through the
// client it is on.
type pipeCount struct{ n *atomic.Int64 }

func (p pipeCount) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p pipeCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p pipeCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.n.Add(1)
		return next(ctx, cmds)
	}
}
