//go:build full

package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClusterReplicas runs a failover and a resharding on one cluster of 3
// masters with a replica each; the steps change the cluster, so they run in
// order, and each checks a ClusterClient made before it still works after.
func TestClusterReplicas(t *testing.T) {
	ctx := context.Background()
	c := StartClusterReplicas(t, 3)
	cc := c.Client(t)
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"shape", func(t *testing.T) {
			masters := c.Masters()
			if len(c.Nodes()) != 6 || len(masters) != 3 {
				t.Fatalf("%d nodes, %d masters; want 6 and 3", len(c.Nodes()), len(masters))
			}
			seen := map[*Server]bool{}
			for _, m := range masters {
				r := c.ReplicaOf(m)
				if r == nil || r == m || seen[r] {
					t.Fatalf("ReplicaOf(%s) = %s", m.Addr(), addrOf(r))
				}
				seen[r] = true
				if err := wantRole(ctx, r, "slave", m); err != nil {
					t.Fatal(err)
				}
			}
			if got := parseInfo(c.Nodes()[0].Client(t).ClusterInfo(ctx).Val())["cluster_size"]; got != "3" {
				t.Fatalf("cluster_size:%s, want 3", got)
			}
		}},
		{"failover", func(t *testing.T) {
			const key = "{fo}k"
			if err := cc.Set(ctx, key, "v", time.Minute).Err(); err != nil {
				t.Fatalf("SET %s: %v", key, err)
			}
			old := c.MasterFor(key)
			want := c.ReplicaOf(old)
			if got := c.Failover(t, key); got != want || c.MasterFor(key) != want || c.ReplicaOf(want) != old {
				t.Fatalf("Failover = %s; MasterFor %s, ReplicaOf(new) %s; want %s with replica %s", addrOf(got), addrOf(c.MasterFor(key)), addrOf(c.ReplicaOf(want)), want.Addr(), old.Addr())
			}
			if got, err := cc.Get(ctx, key).Result(); err != nil || got != "v" {
				t.Fatalf("GET %s after failover = %q, %v", key, got, err)
			}
			if err := cc.Set(ctx, key, "v2", time.Minute).Err(); err != nil {
				t.Fatalf("SET %s after failover: %v", key, err)
			}
			if got, err := want.Client(t).Get(ctx, key).Result(); err != nil || got != "v2" {
				t.Fatalf("GET %s on the new master %s = %q, %v", key, want.Addr(), got, err)
			}
		}},
		{"move-slot", func(t *testing.T) {
			keys := []string{"{mv}a", "{mv}b", "{mv}c"}
			for i, k := range keys {
				if err := cc.Set(ctx, k, i, time.Minute).Err(); err != nil {
					t.Fatalf("SET %s: %v", k, err)
				}
			}
			from := c.MasterFor(keys[0])
			var to *Server
			for _, m := range c.Masters() {
				if m != from {
					to = m
					break
				}
			}
			c.MoveSlot(t, keys[0], to)
			if got := c.MasterFor(keys[0]); got != to {
				t.Fatalf("MasterFor after MoveSlot = %s, want %s", addrOf(got), to.Addr())
			}
			direct := to.Client(t)
			for i, k := range keys {
				if got, err := cc.Get(ctx, k).Int(); err != nil || got != i {
					t.Fatalf("GET %s through the ClusterClient after MoveSlot = %d, %v; want %d", k, got, err, i)
				}
				if got, err := direct.Get(ctx, k).Int(); err != nil || got != i {
					t.Fatalf("GET %s on %s = %d, %v; want %d", k, to.Addr(), got, err, i)
				}
				if n, err := direct.PTTL(ctx, k).Result(); err != nil || n <= 0 {
					t.Fatalf("PTTL %s on %s = %v, %v; want the TTL moved along", k, to.Addr(), n, err)
				}
			}
			if err := from.Client(t).Get(ctx, keys[0]).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
				t.Fatalf("GET %s on the old owner %s: %v; want MOVED", keys[0], from.Addr(), err)
			}
			if err := cc.Set(ctx, "{mv}d", "new", time.Minute).Err(); err != nil {
				t.Fatalf("SET a new key in the moved slot: %v", err)
			}
			c.MoveSlot(t, keys[0], to) // already there: nothing to do
		}},
	}
	for _, st := range steps {
		if !t.Run(st.name, st.run) {
			return
		}
	}
}

// TestClusterRedis6StandIn checks the extra args reach every node: with
// SPUBLISH and SSUBSCRIBE renamed away the cluster forms (redis-cli does not
// need them) and refuses sharded pub/sub as Redis 6 would, while PUBLISH
// works.
func TestClusterRedis6StandIn(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 3, "--rename-command", "SPUBLISH", "", "--rename-command", "SSUBSCRIBE", "")
	cc := c.Client(t)
	for i, s := range c.Nodes() {
		ch := "{r6}ch" + strconv.Itoa(i)
		if err := s.Client(t).Do(ctx, "SPUBLISH", ch, "x").Err(); err == nil || !strings.Contains(err.Error(), "unknown command") {
			t.Fatalf("SPUBLISH on %s: %v; want unknown command", s.Addr(), err)
		}
		if err := s.Client(t).Do(ctx, "SSUBSCRIBE", ch).Err(); err == nil || !strings.Contains(err.Error(), "unknown command") {
			t.Fatalf("SSUBSCRIBE on %s: %v; want unknown command", s.Addr(), err)
		}
	}
	if err := cc.SPublish(ctx, "{r6}ch", "x").Err(); err == nil {
		t.Fatal("SPUBLISH through the ClusterClient succeeded")
	}
	if err := cc.Publish(ctx, "{r6}ch", "x").Err(); err != nil {
		t.Fatalf("PUBLISH: %v", err)
	}
	if err := cc.Set(ctx, "{r6}k", "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
}

// addrOf is s.Addr(), or "<nil>", for failure messages.
func addrOf(s *Server) string {
	if s == nil {
		return "<nil>"
	}
	return s.Addr()
}
