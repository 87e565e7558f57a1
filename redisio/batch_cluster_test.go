//go:build full

package redisio

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestBatcherFollowsNewNodeClient: go-redis closes a Cluster node's client
// about a minute after a cluster state without that node, and makes a new
// one when the address comes back. The per-master batcher kept the client
// it was made with: every call on that master failed with "redis: client is
// closed" from then on, and settlement retried on it forever. Here the
// batcher is handed a closed client for its master's address, as it would
// be holding after such a round trip; the go-redis client has a live one.
// (The real minute-long sequence is TestClusterNodeBackAfterAMinute in the
// root package, under LOCKACTOR_TORTURE.)
func TestBatcherFollowsNewNodeClient(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	c := testConn(t, cc, ShardAuto)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lock := func(name string, seq uint64) Reply {
		return c.Lock(ctx, Op{Latch: LatchKey(name, "c", "lock"), Seq: seq, Keep: time.Second}, name, "owner", time.Minute)
	}
	if ok, _, err := lock("{stale}1", 1).Acquire(); !ok || err != nil {
		t.Fatalf("first Lock: %v, %v", ok, err)
	}
	b, err := c.batcherFor(ctx, "{stale}1")
	if err != nil {
		t.Fatal(err)
	}
	stale := redis.NewClient(&redis.Options{Addr: b.addr})
	_ = stale.Close()
	b.mu.Lock()
	b.rdb = stale
	b.mu.Unlock()

	if ok, _, err := lock("{stale}2", 2).Acquire(); !ok || err != nil {
		t.Fatalf("Lock after the node's client was replaced: %v, %v", ok, err)
	}
	var ran bool
	var rerr error
	done := make(chan struct{})
	c.ResolveThen(ctx, Op{Latch: LatchKey("{stale}2", "c", "lock"), Seq: 2, Keep: time.Second}, func(s Settlement, _ Reply, err error) {
		ran, rerr = s == Ran, err
		close(done)
	})
	<-done
	if !ran || rerr != nil {
		t.Fatalf("settling the Lock: ran %v, %v; want ran", ran, rerr)
	}
}
