//go:build full

package redistest

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestSentinelReplicas starts a master with two replicas under Sentinel
// and fails over once: one of the replicas is promoted, and both other
// data servers (the old master and the other replica) end up replicating
// from it with every write made before.
func TestSentinelReplicas(t *testing.T) {
	ctx := context.Background()
	s := StartSentinelReplicas(t, 2)
	all := s.Servers()
	if len(all) != 3 || s.Master() != all[0] || !slices.Equal(s.Replicas(), all[1:]) || s.Replica() != all[1] {
		t.Fatalf("Servers %v, Master %s, Replicas %v; want 3 servers, the first master", addrsOf(all), addrOf(s.Master()), addrsOf(s.Replicas()))
	}
	fc := s.FailoverClient(t, nil)
	if err := fc.Set(ctx, "before", "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	m := s.Failover(t)
	if m == all[0] || !slices.Contains(all, m) || s.Master() != m {
		t.Fatalf("Failover returned %s, Master %s; want one of the replicas %v", addrOf(m), addrOf(s.Master()), addrsOf(all[1:]))
	}
	reps := s.Replicas()
	if len(reps) != 2 || !slices.Contains(reps, all[0]) || slices.Contains(reps, m) {
		t.Fatalf("Replicas after the failover %v; want the old master and the other replica", addrsOf(reps))
	}
	for _, r := range reps {
		if err := wantRole(ctx, r, "slave", m); err != nil {
			t.Fatal(err)
		}
		if err := waitSynced(m, r, replReadyTimeout); err != nil {
			t.Fatal(err)
		}
		if got, err := r.Client(t).Get(ctx, "before").Result(); err != nil || got != "v" {
			t.Fatalf("GET before on %s = %q, %v; want v", r.Addr(), got, err)
		}
	}
	if got := s.WaitStable(t); got != m {
		t.Fatalf("WaitStable = %s, want %s", addrOf(got), m.Addr())
	}
}
