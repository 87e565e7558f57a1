package redisio

import (
	"context"
	"testing"
	"time"

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
