//go:build full

package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSentinel walks one deployment through a graceful and a crash
// failover; the steps depend on each other, so they run in order.
func TestSentinel(t *testing.T) {
	ctx := context.Background()
	s := StartSentinel(t)
	first, second := s.Servers()[0], s.Servers()[1]
	fc := s.FailoverClient(t, func(o *redis.FailoverOptions) { o.MaxRetries = 10 })
	set := func(t *testing.T, key string) {
		t.Helper()
		if err := fc.Set(ctx, key, "v", time.Minute).Err(); err != nil {
			t.Fatalf("SET %s through the failover client: %v", key, err)
		}
	}
	has := func(t *testing.T, d *Server, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if got, err := d.Client(t).Get(ctx, k).Result(); err != nil || got != "v" {
				t.Fatalf("GET %s on %s = %q, %v; want v", k, d.Addr(), got, err)
			}
		}
	}
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"initial", func(t *testing.T) {
			if s.Master() != first || s.Replica() != second || s.MasterName() == "" || len(s.Addrs()) != 3 {
				t.Fatalf("Master %s Replica %s name %q sentinels %v; want %s, %s", addrOf(s.Master()), addrOf(s.Replica()), s.MasterName(), s.Addrs(), first.Addr(), second.Addr())
			}
			set(t, "before")
			has(t, first, "before")
		}},
		{"graceful-failover", func(t *testing.T) {
			if m := s.Failover(t); m != second || s.Master() != second || s.Replica() != first {
				t.Fatalf("after Failover: returned %s, Master %s; want %s", addrOf(m), addrOf(s.Master()), second.Addr())
			}
			set(t, "after-failover")
			has(t, second, "before", "after-failover")
			if err := wantRole(ctx, first, "slave", second); err != nil {
				t.Fatal(err)
			}
		}},
		{"failover-back-at-once", func(t *testing.T) {
			// The sentinels' INFO of the old master is up to 10s stale here;
			// a second failover must work anyway.
			if m := s.Failover(t); m != first || s.Master() != first {
				t.Fatalf("after the second Failover: returned %s, Master %s; want %s", addrOf(m), addrOf(s.Master()), first.Addr())
			}
			set(t, "after-failback")
			has(t, first, "before", "after-failover", "after-failback")
		}},
		{"crash-failover", func(t *testing.T) {
			if err := waitSynced(first, second, replReadyTimeout); err != nil {
				t.Fatal(err)
			}
			if m := s.CrashFailover(t); m != second || s.Master() != second || s.Replica() != first {
				t.Fatalf("after CrashFailover: returned %s, Master %s; want %s", addrOf(m), addrOf(s.Master()), second.Addr())
			}
			set(t, "after-crash")
			has(t, second, "before", "after-failover", "after-failback", "after-crash")
		}},
	}
	for _, st := range steps {
		if !t.Run(st.name, st.run) {
			return
		}
	}
}
