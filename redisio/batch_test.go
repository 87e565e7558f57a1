package redisio

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/internal/tripcount"
)

// TestConcurrentScriptsShareRoundTrips: scripts that many actors send at
// about the same time go out as pipelines, each caller gets its own reply,
// and a caller that sent a pipeline is not kept sending everyone else's.
func TestConcurrentScriptsShareRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	count := &tripcount.Hook{}
	rdb.AddHook(count)
	c := NewConn(rdb, NewTopology(rdb, ShardOff, quiet), SyncPolicy{})
	defer c.Close(time.Now().Add(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const callers, each = 64, 50
	var wg sync.WaitGroup
	var wrong atomic.Int64
	var slowest atomic.Int64
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprint("owner-", g)
			for i := range each {
				name := fmt.Sprint("batched-", g, "-", i)
				start := time.Now()
				r := c.Lock(ctx, Op{Latch: LatchKey(name, "c", "lock"), Seq: uint64(g*each + i + 1), Keep: time.Second}, name, owner, time.Minute)
				if d := time.Since(start); int64(d) > slowest.Load() {
					slowest.Store(int64(d))
				}
				if ok, _, err := r.Acquire(); !ok || err != nil {
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d of %d calls were not granted their own fresh lock", n, callers*each)
	}
	trips := count.RoundTrips()
	t.Logf("%d calls in %d round trips (%d pipelines); slowest call %v", callers*each, trips, count.Pipelines.Load(), time.Duration(slowest.Load()))
	if trips >= callers*each {
		t.Fatalf("%d round trips for %d concurrent calls: nothing was pipelined", trips, callers*each)
	}
}

// TestPostsAfterCloseAreDropped: latch deletions posted after Close are
// dropped and start nothing that Close would have to wait for.
func TestPostsAfterCloseAreDropped(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := NewConn(rdb, NewTopology(rdb, ShardOff, quiet), SyncPolicy{})
	latch := LatchKey("posted", "c", "lock")
	if err := rdb.Set(context.Background(), latch, "1:i1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if !c.Close(time.Now().Add(time.Second)) {
		t.Fatal("Close with nothing running did not finish")
	}
	c.ForgetLatch(latch, 1)
	time.Sleep(100 * time.Millisecond)
	if n := rdb.Exists(context.Background(), latch).Val(); n != 1 {
		t.Fatal("a deletion posted after Close was sent")
	}
}

// TestNoScriptKeepsOrderOnOneSlot: after the server lost its script cache
// (SCRIPT FLUSH, a restart, a failover) other clients load back only the
// scripts they use, so one call of a pipeline can get NOSCRIPT while a
// later one on the same slot runs. The call that got NOSCRIPT was sent
// again after the rest of the pipeline had run: a fair_cancel could land
// after a newer fair_lock of the same owner. Calls on one slot must run in
// the order they were queued.
func TestNoScriptKeepsOrderOnOneSlot(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := NewConn(rdb, NewTopology(rdb, ShardOff, quiet), SyncPolicy{})
	defer c.Close(time.Now().Add(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := redis.NewScript(`return redis.call('rpush', KEYS[1], 'first')`)
	second := redis.NewScript(`return redis.call('rpush', KEYS[1], 'second')`)
	alone := redis.NewScript(`return redis.call('rpush', KEYS[1], 'alone')`) // the only one on its slot
	const key = "{order}:log"
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := second.Load(ctx, rdb).Err(); err != nil { // as another client's use would
		t.Fatal(err)
	}
	var replies []Reply
	record := func(r Reply) { replies = append(replies, r) }
	c.batch.send(ctx, []*batchCall{
		newCall(ctx, first, []string{key}, nil, record),
		newCall(ctx, second, []string{"{order}:other"}, nil, record),
		newCall(ctx, alone, []string{"{alone}"}, nil, record),
		newCall(ctx, second, []string{key}, nil, record),
	}, 0)
	if len(replies) != 4 {
		t.Fatalf("%d replies for 4 calls", len(replies))
	}
	for i, r := range replies {
		if r.Err != nil {
			t.Fatalf("call %d: %v", i, r.Err)
		}
	}
	if got := rdb.LRange(ctx, key, 0, -1).Val(); len(got) != 2 || got[0] != "first" || got[1] != "second" {
		t.Fatalf("ran in the order %v, want [first second]", got)
	}
	if got := rdb.LRange(ctx, "{alone}", 0, -1).Val(); len(got) != 1 {
		t.Fatalf("the call answered NOSCRIPT ran %d times, want once", len(got))
	}
}
