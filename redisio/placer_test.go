//go:build full

package redisio

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestShardChannelsAvoidDemotedMaster: right after a Cluster failover,
// go-redis's slot map can still name the demoted master (it was fetched
// from a node the news had not reached), and Redis 7 lets a replica take
// SSUBSCRIBE for its master's slots. A channel placed there stayed there
// for good, invisible to the new master's PUBSUB SHARDNUMSUB (hand-off runs
// count subscribers there), and TestClusterSlotMovesKeepWaitersWoken/failover
// flaked on it under load. Here the slot map names the channel's replica as
// its master until the test corrects it: the channel must land on the
// master only, never on the replica.
func TestShardChannelsAvoidDemotedMaster(t *testing.T) {
	cl := redistest.StartClusterReplicas(t, 3)
	const channel = "redisson_lock__channel:{placed}"
	master := cl.MasterFor(channel)
	replica := cl.ReplicaOf(master)
	var stale atomic.Bool
	stale.Store(true)
	real := cl.Client(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cl.Addrs(),
		// The map as a lagging node would give it: the replica named
		// first (master) for the channel's slot while stale.
		ClusterSlots: func(ctx context.Context) ([]redis.ClusterSlot, error) {
			// ClusterOptions.ClusterSlots wants CLUSTER SLOTS's
			// shape, and go-redis itself loads its map with it.
			//lint:ignore SA1019 this stands in for go-redis's own CLUSTER SLOTS call.
			slots, err := real.ClusterSlots(ctx).Result()
			if err != nil || !stale.Load() {
				return slots, err
			}
			at := SlotOf(channel)
			for i, s := range slots {
				if s.Start > at || s.End < at {
					continue
				}
				// (CLUSTER SLOTS may not list the replica at all.)
				nodes := []redis.ClusterNode{{Addr: replica.Addr()}}
				for _, n := range s.Nodes {
					if _, port, _ := net.SplitHostPort(n.Addr); !strings.HasSuffix(replica.Addr(), ":"+port) {
						nodes = append(nodes, n)
					}
				}
				slots[i].Nodes = nodes
			}
			return slots, nil
		},
	})
	defer cc.Close()
	p := NewPubSub(cc, NewTopology(cc, ShardOn, quiet), time.Second, quiet)
	defer p.Close(time.Now().Add(2 * time.Second))
	confirmed := make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := p.Subscribe(ctx, channel, func(ev Event) {
		if ev.Kind == Subscribed {
			select {
			case confirmed <- struct{}{}:
			default:
			}
		}
	}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	count := func(s *redistest.Server) int64 {
		return s.Client(t).PubSubShardNumSub(ctx, channel).Val()[channel]
	}
	// While the map is stale, the channel must not be subscribed anywhere
	// but the true master (where it cannot be yet: the map does not lead
	// there).
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n := count(replica); n != 0 {
			t.Fatalf("SHARDNUMSUB on the replica = %d while the slot map named it master; want 0", n)
		}
	}
	stale.Store(false)
	select {
	case <-confirmed:
	case <-ctx.Done():
		t.Fatal("the channel was never subscribed once the slot map was right")
	}
	if n, r := count(master), count(replica); n != 1 || r != 0 {
		t.Fatalf("SHARDNUMSUB master=%d replica=%d; want 1 and 0", n, r)
	}
}
