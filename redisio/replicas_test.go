package redisio

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestSyncTargetWaitUnlessAOFAsked guards a past defect (read in Redis's
// source; Redis 7.2+, which has WAITAOF, cannot be run here): WAITAOF was
// chosen because the master had AOF on, but a replica without AOF never
// acknowledges it (it sends no FACK), so on a master with AOF and replicas
// without it every grant would have been undone. WAIT is used unless the
// policy asks for WAITAOF; asked for, WAITAOF is used where the server has
// it. The master's facts are those a Redis 7.2 master with appendonly yes
// reports (seeded, so nothing depends on the local server's version).
func TestSyncTargetWaitUnlessAOFAsked(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	for _, tt := range []struct {
		name    string
		policy  SyncPolicy
		wantAOF bool
	}{
		{"Default", SyncPolicy{Replicas: -1, Timeout: time.Second}, false},
		{"Explicit", SyncPolicy{Replicas: 1, Timeout: time.Second, Required: true}, false},
		{"AOFAsked", SyncPolicy{Replicas: -1, Timeout: time.Second, AOF: true}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			topo := NewTopology(rdb, ShardOff, quiet)
			topo.nodes[""] = &nodeFacts{read: time.Now().Add(time.Hour), replicas: 1, aof: true, aofKnown: true}
			c := NewConn(rdb, topo, tt.policy)
			defer c.Close(time.Now().Add(time.Second))
			got := c.targetAt(context.Background(), "", rdb)
			if got.need != 1 || got.aof != tt.wantAOF {
				t.Fatalf("target = %+v, want need 1 and aof %v", got, tt.wantAOF)
			}
		})
	}
}

// failInfo fails every pipeline that carries INFO, without sending it, as
// a transient error would (not an ACL denial).
type failInfo struct{}

func (failInfo) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (failInfo) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (failInfo) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "info" {
				err := errors.New("ERR injected: INFO failed")
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
		}
		return next(ctx, cmds)
	}
}

// A master whose INFO cannot be read (a transient error, not an ACL
// denial) still gets its WAIT: an explicit count as asked, "every
// replica" as many as were last read. It used to get none, and the
// pipeline's grants counted as confirmed.
func TestSyncTargetWhenInfoFails(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	rdb.AddHook(failInfo{})
	for _, tt := range []struct {
		name     string
		replicas int           // the policy's count
		last     int           // replicas last read
		read     time.Duration // how long ago (0: never)
		want     int
	}{
		{"explicit count, never read", 1, 0, 0, 1},
		{"explicit count, stale facts", 2, 1, time.Hour, 2},
		{"every replica, stale facts", -1, 2, time.Hour, 2},
		{"every replica, never read", -1, 0, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			topo := NewTopology(rdb, ShardOff, quiet)
			if tt.read > 0 {
				topo.nodes[""] = &nodeFacts{read: time.Now().Add(-tt.read), replicas: tt.last}
			}
			c := NewConn(rdb, topo, SyncPolicy{Replicas: tt.replicas, Timeout: time.Second, Required: tt.replicas > 0})
			defer c.Close(time.Now().Add(time.Second))
			if got := c.targetAt(context.Background(), "", rdb); got.need != tt.want {
				t.Fatalf("target = %+v, want need %d", got, tt.want)
			}
		})
	}
}
