//go:build full

package lockactor_test

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

// TestSentinelThroughFailoverClusterClient: go-redis's
// NewFailoverClusterClient is a *redis.ClusterClient over a Sentinel group,
// not a Redis Cluster. It used to be treated as one: releases went out with
// SPUBLISH, which a Redisson Sentinel client (SUBSCRIBE) never hears, and
// names such as "a}b", fine on one server, were refused. Now it is treated
// as the Sentinel group it is.
func TestSentinelThroughFailoverClusterClient(t *testing.T) {
	sen := redistest.StartSentinel(t)
	c := newClient(t, sen.FailoverClusterClient(t))
	ctx := ctxFor(t, 20*time.Second)
	master := sen.Master().Client(t)

	for _, name := range []string{"fcc-plain", "a}b"} {
		t.Run(name, func(t *testing.T) {
			// A Redisson Sentinel client listens with SUBSCRIBE.
			ps := master.Subscribe(ctx, redisio.LockChannel(name))
			defer ps.Close()
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			l := c.Lock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock(%q) through a FailoverClusterClient: %v", name, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-ps.Channel():
				if m.Payload != "0" {
					t.Fatalf("release message %q, want \"0\"", m.Payload)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("a SUBSCRIBE listener heard no release: it was not sent with PUBLISH")
			}
		})
	}
}
