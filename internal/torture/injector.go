package torture

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// inject runs the fault schedule: each planned fault at its offset from
// start, one at a time, until the plan or the run ends.
func (r *runner) inject(start time.Time, plan []Planned) {
	tb := bgTB{TB: r.tb, r: r}
	for _, p := range plan {
		if !r.sleepUntil(start.Add(p.At)) {
			return
		}
		r.apply(tb, p)
	}
}

// sleepUntil sleeps until t; false if the run stopped first.
func (r *runner) sleepUntil(t time.Time) bool {
	for {
		if r.stopping() {
			return false
		}
		d := time.Until(t)
		if d <= 0 {
			return true
		}
		time.Sleep(min(d, 100*time.Millisecond))
	}
}

// window opens a fault window of p at f's start and ends it p.Dur later
// (or when the run stops).
func (r *runner) window(f Fault, p Planned, open func(Planned), end func()) {
	open(p)
	r.sleepUntil(f.Start.Add(p.Dur))
	end()
}

// apply injects one fault and logs it with its real start and end.
func (r *runner) apply(tb testing.TB, p Planned) {
	if r.applyTopology(tb, p) {
		return
	}
	f := Fault{Kind: p.Kind, Server: p.Server, Start: time.Now()}
	srv := r.servers[p.Server]
	switch p.Kind {
	case FaultHook:
		f.Detail = fmt.Sprintf("client %d (-1: all), p=%.2f", p.Client, p.Prob)
		r.window(f, p, r.faults.Open, r.faults.Close)
	case FaultBlock:
		f.Detail = fmt.Sprintf("client %d (-1: all), %s scripts, answered %q", p.Client, p.Class, refusalOf(p))
		r.window(f, p, r.faults.Block, r.faults.Unblock)
	case FaultLate:
		f.Detail = "replies of scripts setting short leases (hand-offs, renewals, permits) come back after the lease"
		r.window(f, p, r.faults.Slow, r.faults.Unslow)
	case FaultSubDelay:
		f.Detail = fmt.Sprintf("client %d (-1: all): pub/sub reads %v late", p.Client, p.Lag)
		r.window(f, p, r.faults.SlowSub, r.faults.UnslowSub)
	case FaultSlowLink:
		f.Detail = fmt.Sprintf("client %d: every command %v late", p.Client, p.Lag)
		r.window(f, p, r.faults.SlowLink, r.faults.UnslowLink)
	case FaultScriptFlush:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		f.Detail = fmt.Sprintf("(err %v)", r.admin[p.Server].ScriptFlush(ctx).Err())
		cancel()
	case FaultTokenDelete:
		f.Detail = deleteTokens(r.admin[p.Server])
	case FaultDenyPublish:
		nodes := func() []*redistest.Server { return []*redistest.Server{srv} }
		if t, ok := r.cfg.Topology.(interface{ allNodes() []*redistest.Server }); ok {
			nodes = t.allNodes
		}
		f.Detail = denyPublish(r, nodes, p.Dur)
	case FaultKillPubSub, FaultKillNormal:
		typ := "pubsub"
		if p.Kind == FaultKillNormal {
			typ = "normal"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := r.admin[p.Server].Do(ctx, "client", "kill", "type", typ).Int()
		cancel()
		f.Detail = fmt.Sprintf("%d connection(s) killed (err %v)", n, err)
	case FaultPause:
		f.Detail = p.Dur.String()
		srv.Pause(tb)
		time.Sleep(p.Dur) // short; Resume must come whatever happens
		srv.Resume(tb)
	case FaultRestart:
		// The epoch is odd from before the kill until the new generation of
		// semaphores exists: a semaphore call that overlaps any of it does
		// not give its permits back (see semStep).
		r.epoch.Add(1)
		r.checkSemCounts() // the restart wipes the counts
		f.Start = time.Now()
		srv.Kill(tb)
		if p.Dur > 0 {
			f.Detail = fmt.Sprintf("down %v", p.Dur)
			time.Sleep(p.Dur)
		}
		srv.Restart(tb)
		f.End = time.Now()
		r.record(f)
		r.newGeneration(r.gen.Load() + 1)
		r.epoch.Add(1)
		return
	case SemGen:
		r.newGeneration(r.gen.Load() + 1)
		f.Detail = fmt.Sprintf("generation %d", r.gen.Load())
	}
	f.End = time.Now()
	r.record(f)
}

func (r *runner) record(f Fault) {
	r.mu.Lock()
	r.faultLog = append(r.faultLog, f)
	r.mu.Unlock()
	r.logf("+%.3fs %s on %s for %v %s", f.Start.Sub(r.start).Seconds(), f.Kind, f.Server,
		f.End.Sub(f.Start).Round(time.Millisecond), f.Detail)
}

// bgTB lets redistest's fault methods run on the injector's goroutine: a
// Fatal there may not call FailNow (only the test's goroutine may), so it
// becomes a workload violation and ends the injector.
type bgTB struct {
	testing.TB
	r *runner
}

func (b bgTB) Helper() {}

func (b bgTB) Fatalf(format string, args ...any) {
	b.r.violate(VWorkload, "fault injection failed: "+fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (b bgTB) Fatal(args ...any) { b.Fatalf("%s", fmt.Sprint(args...)) }

func (b bgTB) Skipf(format string, args ...any) { b.Fatalf(format, args...) }

func (b bgTB) Errorf(format string, args ...any) {
	b.r.violate(VWorkload, "fault injection: "+fmt.Sprintf(format, args...))
}

// deleteTokens deletes every fencing token counter rdb's server (each
// master, on a Cluster) has and says how many it found.
func deleteTokens(rdb redis.UniversalClient) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var n atomic.Int64
	del := func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, "redisson_lock_token:*").Result()
		for _, k := range keys { // one by one: a Cluster node's keys span slots
			if err == nil {
				err = node.Del(ctx, k).Err()
				n.Add(1)
			}
		}
		return err
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, del)
	case *redis.Client:
		err = del(ctx, c)
	default:
		err = fmt.Errorf("no way to reach every node of a %T", rdb)
	}
	return fmt.Sprintf("%d counter(s) deleted (err %v)", n.Load(), err)
}
