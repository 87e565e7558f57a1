package redisio

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestConcurrentScriptsShareRoundTrips: scripts that many actors send at
// about the same time go out as pipelines, each caller gets its own reply,
// and a caller that sent a pipeline is not kept sending everyone else's.
func TestConcurrentScriptsShareRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	count := &redistest.RoundTrips{}
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
	trips := count.Total()
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
