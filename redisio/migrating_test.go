//go:build full

package redisio

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestScriptsOnMigratingSlot: while a slot is MIGRATING, Redis checks each
// command inside a script, and one that touches a key missing on the
// source (one the same run deleted a moment before) aborts the script with
// "non local key" after the writes before it took effect, and before the
// latch recorded anything. handoff.lua did that: its HDEL of the last
// field deleted the hash, its HSET of the next owner failed, and the lock
// was left free, with a retry that then reported "not held". Every
// state-changing script must either run whole on a migrating slot or
// change nothing (TRYAGAIN, which redisio retries once the slot has moved).
func TestScriptsOnMigratingSlot(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	c := testConn(t, cc, ShardAuto)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lockBy := func(owner string) func(name string, op Op) Reply {
		return func(name string, op Op) Reply { return c.Lock(ctx, op, name, owner, time.Minute) }
	}
	past := time.Now().Add(-2 * time.Minute)
	fairBy := func(owner string, now time.Time) func(name string, op Op) Reply {
		return func(name string, op Op) Reply {
			return c.FairLock(ctx, op, name, owner, time.Minute, time.Millisecond, now, false)
		}
	}
	id := func(b byte) string { return string(append(make([]byte, 15), b)) }
	rows := []struct {
		name  string
		kind  string                           // the latch's
		setup []func(name string, op Op) Reply // on a settled slot, in turn
		call  func(ctx context.Context, name string, op Op) Reply
	}{
		{"fair lock purging the queue's last waiter", "fair", []func(string, Op) Reply{fairBy("a", time.Now()), fairBy("dead", past)},
			func(ctx context.Context, name string, op Op) Reply {
				return c.FairLock(ctx, op, name, "x", time.Minute, 5*time.Second, time.Now(), false)
			}},
		{"permit acquire reclaiming an expired permit", "permit", []func(string, Op) Reply{
			func(name string, op Op) Reply { return c.SemaphoreSet(ctx, op, name, 2) },
			func(name string, op Op) Reply { return c.PermitAcquire(ctx, op, name, id(1), time.Millisecond) }},
			func(ctx context.Context, name string, op Op) Reply {
				return c.PermitAcquire(ctx, op, name, id(2), time.Minute)
			}},
		{"read lock of a second reader", "rw", []func(string, Op) Reply{
			func(name string, op Op) Reply { return c.ReadLock(ctx, op, name, "a", time.Minute) }},
			func(ctx context.Context, name string, op Op) Reply {
				return c.ReadLock(ctx, op, name, "b", time.Minute)
			}},
		{"handoff of the last hold", "lock", []func(string, Op) Reply{lockBy("a")},
			func(ctx context.Context, name string, op Op) Reply {
				return c.Handoff(ctx, op, name, "a", time.Minute, "b", time.Minute)
			}},
		{"handoff of one of two holds", "lock", []func(string, Op) Reply{lockBy("a"), lockBy("a")},
			func(ctx context.Context, name string, op Op) Reply {
				return c.Handoff(ctx, op, name, "a", time.Minute, "b", time.Minute)
			}},
		{"unlock of the last hold", "lock", []func(string, Op) Reply{lockBy("a")},
			func(ctx context.Context, name string, op Op) Reply { return c.Unlock(ctx, op, name, "a", time.Minute) }},
		{"reentrant lock", "lock", []func(string, Op) Reply{lockBy("a")},
			func(ctx context.Context, name string, op Op) Reply { return c.Lock(ctx, op, name, "a", time.Minute) }},
	}
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			name := fmt.Sprintf("{migrating%d}", i)
			latch := LatchKey(name, "c", row.kind)
			seq := uint64(0)
			op := func() Op { seq++; return Op{Latch: latch, Seq: seq, Keep: time.Minute} }
			for _, s := range row.setup {
				if r := s(name, op()); r.Err != nil && r.Err != redis.Nil {
					t.Fatalf("setup: %v", r.Err)
				}
			}
			time.Sleep(5 * time.Millisecond) // a 1ms permit lease runs out
			src := cl.NodeFor(name)
			finish := cl.BeginSlotMove(t, name, otherMasterThan(t, cl, src))
			node := redis.NewClient(&redis.Options{Addr: src.Addr()})
			defer node.Close()
			before := slotKeys(ctx, t, node, name)
			cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
			r := row.call(cctx, name, op())
			ccancel()
			after := slotKeys(ctx, t, node, name)
			if err := finish(); err != nil {
				t.Fatal(err)
			}
			if r.Err != nil && r.Err != redis.Nil && !maps.Equal(before, after) {
				t.Fatalf("failed with %v after changing the slot:\nbefore %q\nafter  %q", r.Err, before, after)
			}
			t.Logf("reply %v, %v; slot changed: %v", r.Val, r.Err, !maps.Equal(before, after))
		})
	}
}

// slotKeys is every key of name's slot on node, with its DUMP.
func slotKeys(ctx context.Context, t *testing.T, node *redis.Client, name string) map[string]string {
	t.Helper()
	slot, err := node.ClusterKeySlot(ctx, name).Result()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := node.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = node.Dump(ctx, k).Val()
	}
	return out
}

// otherMasterThan is a master of cl other than m.
func otherMasterThan(t *testing.T, cl *redistest.Cluster, m *redistest.Server) *redistest.Server {
	t.Helper()
	for _, o := range cl.Masters() {
		if o != m {
			return o
		}
	}
	t.Fatal("no other master")
	return nil
}
