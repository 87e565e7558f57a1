package redistest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestReplicated(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		linked bool
		run    func(t *testing.T, r *Replicated)
	}{
		{"replica-reads-after-WaitSynced", false, func(t *testing.T, r *Replicated) {
			mc, rc := r.Master().Client(t), r.Replica().Client(t)
			for i := range 100 {
				if err := mc.Set(ctx, "k"+strconv.Itoa(i), i, time.Minute).Err(); err != nil {
					t.Fatalf("SET on master: %v", err)
				}
			}
			r.WaitSynced(t)
			if got, err := rc.Get(ctx, "k99").Int(); err != nil || got != 99 {
				t.Fatalf("GET k99 on replica = %d, %v; want 99", got, err)
			}
			if err := rc.Set(ctx, "x", 1, 0).Err(); err == nil {
				t.Fatal("SET on the replica succeeded; want READONLY")
			}
			if n, err := rc.PTTL(ctx, "k1").Result(); err != nil || n <= 0 {
				t.Fatalf("PTTL k1 on replica = %v, %v; want the TTL replicated", n, err)
			}
		}},
		{"promote-after-kill", false, func(t *testing.T, r *Replicated) {
			mc := r.Master().Client(t)
			if err := mc.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
				t.Fatalf("SET on master: %v", err)
			}
			r.WaitSynced(t)
			r.Master().Kill(t)
			r.Promote(t)
			rc := r.Replica().Client(t)
			if got, err := rc.Get(ctx, "k").Result(); err != nil || got != "v" {
				t.Fatalf("GET k on promoted replica = %q, %v; want v", got, err)
			}
			if err := rc.Set(ctx, "after", "1", 0).Err(); err != nil {
				t.Fatalf("SET on promoted replica: %v", err)
			}
		}},
		{"frozen-link-loses-write", true, func(t *testing.T, r *Replicated) {
			mc := r.Master().Client(t)
			if err := mc.Set(ctx, "synced", "1", time.Minute).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			r.WaitSynced(t)
			if n := r.Link().Freeze(nil); n != 1 {
				t.Fatalf("Freeze froze %d connections; want the replication link", n)
			}
			if err := mc.Set(ctx, "lost", "1", time.Minute).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			r.Master().Kill(t)
			r.Promote(t)
			rc := r.Replica().Client(t)
			if err := rc.Get(ctx, "synced").Err(); err != nil {
				t.Fatalf("GET synced on promoted replica: %v", err)
			}
			if err := rc.Get(ctx, "lost").Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("GET lost on promoted replica: %v; want nil (the write never left the master)", err)
			}
		}},
		{"paused-replica-catches-up", false, func(t *testing.T, r *Replicated) {
			r.Replica().Pause(t)
			if err := r.Master().Client(t).Set(ctx, "k", "v", time.Minute).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			r.Replica().Resume(t)
			r.WaitSynced(t)
			if got, err := r.Replica().Client(t).Get(ctx, "k").Result(); err != nil || got != "v" {
				t.Fatalf("GET k on replica = %q, %v; want v", got, err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			var r *Replicated
			if tc.linked {
				r = StartReplicatedLinked(t)
			} else {
				r = StartReplicated(t)
			}
			t.Logf("pair ready in %v", time.Since(start).Round(time.Microsecond))
			tc.run(t, r)
		})
	}
}

// TestReplicatedRounds checks that a fresh pair per round is cheap, as the
// crash-failover tests that use one need.
func TestReplicatedRounds(t *testing.T) {
	const rounds = 10
	var startTotal, stopTotal time.Duration
	for i := range rounds {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			start := time.Now()
			r := StartReplicated(t)
			startTotal += time.Since(start)
			if err := r.Master().Client(t).Set(context.Background(), "k", i, 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			r.WaitSynced(t)
			r.Master().Kill(t)
			r.Promote(t)
			start = time.Now()
			r.Stop()
			stopTotal += time.Since(start)
		})
	}
	t.Logf("average over %d rounds: start %v, stop %v", rounds, startTotal/rounds, stopTotal/rounds)
	if avg := (startTotal + stopTotal) / rounds; avg > 500*time.Millisecond {
		t.Errorf("a round's start+stop averages %v; want well under a second", avg)
	}
}
