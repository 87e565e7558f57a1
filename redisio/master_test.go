package redisio

import (
	"context"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

func TestSameServer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:6379", "127.0.0.1:6379", true},
		{":6379", "127.0.0.1:6379", true}, // go-redis's Cluster client drops a loopback host
		{"localhost:6379", "127.0.0.1:6379", true},
		{"[::1]:6379", "127.0.0.1:6379", true},
		{"127.0.0.1:6379", "127.0.0.1:6380", false},
		{"10.0.0.1:6379", "10.0.0.2:6379", false},
		{"10.0.0.1:6379", ":6379", false},
		{"no port", "127.0.0.1:6379", false},
	} {
		if got := sameServer(tc.a, tc.b); got != tc.want {
			t.Errorf("sameServer(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// The reads after a switch go to the server named, not through the
// client's pool, and say per field: its key's TTL, 0 when missing, -1 when
// the key has no TTL.
func TestHoldsOnReadsTheServerNamed(t *testing.T) {
	pooled, other := redistest.Start(t), redistest.Start(t)
	pooled.NeedsReal(t, "INFO server, to tell which server a pool reaches")
	ctx := context.Background()
	c := testConn(t, pooled.Client(t), ShardOff)
	o := other.Client(t)
	o.HSet(ctx, "lease", "me", 1)
	o.PExpire(ctx, "lease", 5*time.Second)
	o.HSet(ctx, "forever", "me", 1)
	pooled.Client(t).HSet(ctx, "onlyPooled", "me", 1) // not on other: reads must not see it

	for _, tc := range []struct {
		name   string
		fields []string
		check  func(d time.Duration) bool
		want   string
	}{
		{"lease", []string{"me"}, func(d time.Duration) bool { return d > 4*time.Second && d <= 5*time.Second }, "4-5s"},
		{"lease", []string{"you"}, func(d time.Duration) bool { return d == 0 }, "0 (missing field)"},
		{"forever", []string{"me"}, func(d time.Duration) bool { return d == -1 }, "-1 (no TTL)"},
		{"onlyPooled", []string{"me"}, func(d time.Duration) bool { return d == 0 }, "0 (read on the other server)"},
	} {
		got := make(chan []time.Duration, 1)
		c.HoldsOnThen(ctx, other.Addr(), tc.name, tc.fields, func(left []time.Duration, err error) {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			got <- left
		})
		if left := <-got; len(left) != 1 || !tc.check(left[0]) {
			t.Errorf("HoldsOnThen(%s, %v) = %v, want %s", tc.name, tc.fields, left, tc.want)
		}
	}

	o.RPush(ctx, FairQueue("fair"), "a", "b")
	q := make(chan []string, 1)
	c.QueuedOnThen(ctx, other.Addr(), "fair", func(owners []string, err error) {
		if err != nil {
			t.Error(err)
		}
		q <- owners
	})
	if owners := <-q; len(owners) != 2 || owners[0] != "a" || owners[1] != "b" {
		t.Errorf("QueuedOnThen = %v, want [a b]", owners)
	}

	for _, tc := range []struct {
		addr string
		want bool
	}{{pooled.Addr(), true}, {other.Addr(), false}} {
		if got, err := c.PoolReaches(ctx, tc.addr); err != nil || got != tc.want {
			t.Errorf("PoolReaches(%s) = %v, %v; want %v", tc.addr, got, err, tc.want)
		}
	}
}

// After Close the reads answer ErrClosed at once and start nothing.
func TestHoldsOnAfterClose(t *testing.T) {
	srv := redistest.Start(t)
	c := NewConn(srv.Client(t), NewTopology(srv.Client(t), ShardOff, quiet), SyncPolicy{})
	c.Close(time.Now().Add(time.Second))
	var got error
	c.HoldsOnThen(context.Background(), srv.Addr(), "x", []string{"f"}, func(_ []time.Duration, err error) { got = err })
	if got != ErrClosed {
		t.Fatalf("HoldsOnThen after Close: %v, want ErrClosed", got)
	}
}
