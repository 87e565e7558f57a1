package lockactor_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestClusterStoppedMasterSparesHealthyOnes: one master SIGSTOPped (the
// cluster keeps serving the others: full coverage not required). Asking
// whether the masters know SPUBLISH used to ask every master, synchronously,
// on the actor's goroutine (and inside the pub/sub lock), and again on
// every release until one probe succeeded: an Unlock on a healthy master
// failed after 5-10 s and the lock stayed held; a waiter on a healthy
// master could not subscribe. Now nothing waits on the stopped master but
// its own names.
func TestClusterStoppedMasterSparesHealthyOnes(t *testing.T) {
	cl := redistest.StartCluster(t, 3, "--cluster-require-full-coverage", "no")
	names := namesOnEveryMaster(t, cl, "stopped-")
	ctx := ctxFor(t, 30*time.Second)
	ra, rb := cl.Client(t), cl.Client(t)
	for _, rdb := range []*redis.ClusterClient{ra, rb} {
		// go-redis loads a ClusterClient's slot map on its first command,
		// from nodes in turn, and would wait out the stopped one: that
		// belongs to the client's start-up, not to this test.
		if err := rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
	}
	a, b := newClient(t, ra), newClient(t, rb)
	stopped := cl.NodeFor(names[0])
	stopped.Pause(t)
	defer stopped.Resume(t)
	const bound = 2 * time.Second // each step takes milliseconds when nothing waits on the stopped master

	for _, name := range names[1:] {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			l := a.Lock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock after %v: %v", time.Since(start), err)
			}
			if d := time.Since(start); d > bound {
				t.Fatalf("Lock+Unlock took %v", d)
			}
			if n := cl.NodeFor(name).Client(t).Exists(ctx, name).Val(); n != 0 {
				t.Fatal("the lock is still held after Unlock")
			}
			// A waiter (which subscribes) is woken by the release.
			holder, waiter := a.Lock(name), b.Lock(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if d := wakeAfter(t, func() error { return waiter.Lock(wctx) }, func() error { return holder.Unlock(ctx) }); d > bound {
				t.Fatalf("waiter woken %v after Unlock", d)
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
