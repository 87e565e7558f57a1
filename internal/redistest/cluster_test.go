//go:build full

package redistest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const clusterWait = 5 * time.Second // for pub/sub deliveries

// clusterChecks run against a formed 3-master cluster, concurrently; each
// uses its own keys and channels and leaves the nodes running.
var clusterChecks = []struct {
	name string
	run  func(t *testing.T, c *Cluster)
}{
	{"state-ok", func(t *testing.T, c *Cluster) {
		if len(c.Nodes()) != 3 || len(c.Addrs()) != 3 {
			t.Fatalf("%d nodes, %d addrs; want 3", len(c.Nodes()), len(c.Addrs()))
		}
		seen := map[int]bool{}
		for i, s := range c.Nodes() {
			if s.Addr() != c.Addrs()[i] || s.Embedded() || s.PID() == 0 {
				t.Fatalf("node %d: addr %s (Addrs has %s), embedded %v, pid %d", i, s.Addr(), c.Addrs()[i], s.Embedded(), s.PID())
			}
			if seen[s.Port()] {
				t.Fatalf("port %d used twice", s.Port())
			}
			seen[s.Port()] = true
			info, err := s.Client(t).ClusterInfo(context.Background()).Result()
			if err != nil {
				t.Fatalf("CLUSTER INFO on %s: %v", s.Addr(), err)
			}
			got := parseInfo(info)
			for k, v := range map[string]string{"cluster_state": "ok", "cluster_size": "3", "cluster_known_nodes": "3", "cluster_slots_ok": "16384"} {
				if got[k] != v {
					t.Errorf("%s: %s:%s, want %s", s.Addr(), k, got[k], v)
				}
			}
		}
	}},
	{"keys-spread-over-masters", func(t *testing.T, c *Cluster) {
		ctx := context.Background()
		cc := c.Client(t)
		owners := map[*Server]bool{}
		for _, tag := range []string{"a", "b", "c"} {
			owners[mustNodeFor(t, c, "{"+tag+"}x")] = true
		}
		if len(owners) < 2 {
			t.Errorf("{a}x, {b}x, {c}x all on one master")
		}
		tags := spreadTags(t, c)
		for _, tag := range tags {
			key := "{" + tag + "}x"
			n := mustNodeFor(t, c, key)
			m, err := cc.MasterForKey(ctx, key)
			if err != nil || m.Options().Addr != n.Addr() {
				t.Errorf("NodeFor(%s) = %s; ClusterClient.MasterForKey = %v, %v", key, n.Addr(), m, err)
			}
		}
		t.Logf("hash tags on 3 different masters: %q", tags)
	}},
	{"set-get-on-each-master", func(t *testing.T, c *Cluster) {
		ctx := context.Background()
		cc := c.Client(t)
		for _, tag := range spreadTags(t, c) {
			key := "{" + tag + "}set-get"
			if err := cc.Set(ctx, key, "v-"+tag, time.Minute).Err(); err != nil {
				t.Fatalf("SET %s: %v", key, err)
			}
			if got, err := cc.Get(ctx, key).Result(); err != nil || got != "v-"+tag {
				t.Fatalf("GET %s = %q, %v; want v-%s", key, got, err, tag)
			}
			// The key really is on NodeFor's master: a plain client there
			// reads it without a MOVED redirection.
			n := mustNodeFor(t, c, key)
			if got, err := n.Client(t).Get(ctx, key).Result(); err != nil || got != "v-"+tag {
				t.Fatalf("GET %s directly on %s = %q, %v", key, n.Addr(), got, err)
			}
		}
	}},
	{"eval-two-keys-one-slot", func(t *testing.T, c *Cluster) {
		ctx := context.Background()
		cc := c.Client(t)
		const script = `redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[2]); return redis.call('MGET', KEYS[1], KEYS[2])`
		got, err := cc.Eval(ctx, script, []string{"{eval}one", "{eval}two"}, "1", "2").StringSlice()
		if err != nil || strings.Join(got, ",") != "1,2" {
			t.Fatalf("EVAL on {eval}one {eval}two = %q, %v; want [1 2]", got, err)
		}
		tags := spreadTags(t, c) // on different masters, so certainly different slots
		err = cc.Eval(ctx, script, []string{"{" + tags[0] + "}e", "{" + tags[1] + "}e"}, "1", "2").Err()
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("EVAL on keys in different slots: %v; want CROSSSLOT", err)
		}
	}},
	{"spublish-reaches-ssubscribe", func(t *testing.T, c *Cluster) {
		cc := c.Client(t)
		for _, tag := range spreadTags(t, c) {
			ch := "{" + tag + "}events"
			ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
			ps := cc.SSubscribe(ctx, ch)
			confirm(t, ps, "ssubscribe", ch)
			if n, err := cc.SPublish(ctx, ch, "hello "+tag).Result(); err != nil || n != 1 {
				t.Fatalf("SPUBLISH %s = %d, %v; want 1 receiver", ch, n, err)
			}
			if msg := receive(t, ps); msg.Channel != ch || msg.Payload != "hello "+tag {
				t.Fatalf("got %s %q; want %s %q", msg.Channel, msg.Payload, ch, "hello "+tag)
			}
			_ = ps.Close()
			cancel()
		}
	}},
	{"publish-crosses-nodes", func(t *testing.T, c *Cluster) {
		nodes := c.Nodes()
		for _, p := range [][2]int{{0, 1}, {1, 2}, {2, 0}} {
			sub, pub := nodes[p[0]], nodes[p[1]]
			ch := fmt.Sprintf("broadcast-%d-%d", p[0], p[1])
			ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
			ps := sub.Client(t).Subscribe(ctx, ch)
			confirm(t, ps, "subscribe", ch)
			if err := pub.Client(t).Publish(ctx, ch, "hi").Err(); err != nil {
				t.Fatalf("PUBLISH on %s: %v", pub.Addr(), err)
			}
			if msg := receive(t, ps); msg.Channel != ch || msg.Payload != "hi" {
				t.Fatalf("got %s %q; want %s hi", msg.Channel, msg.Payload, ch)
			}
			_ = ps.Close()
			cancel()
		}
	}},
}

func runClusterChecks(t *testing.T, get func(t *testing.T) *Cluster) {
	for _, tc := range clusterChecks {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, get(t))
		})
	}
}

func TestStartCluster(t *testing.T) {
	t.Parallel()
	var c *Cluster
	t.Run("cluster", func(t *testing.T) {
		start := time.Now()
		c = StartCluster(t, 3)
		t.Logf("StartCluster(3) took %v", time.Since(start))
		t.Run("checks", func(t *testing.T) {
			runClusterChecks(t, func(*testing.T) *Cluster { return c })
		})
		t.Run("kill-restart-rejoins", func(t *testing.T) {
			ctx := context.Background()
			n := mustNodeFor(t, c, "{rejoin}k")
			id, err := n.Client(t).ClusterMyID(ctx).Result()
			if err != nil {
				t.Fatalf("CLUSTER MYID: %v", err)
			}
			n.Kill(t)
			if got := c.NodeFor("{rejoin}k"); got != n {
				t.Fatalf("NodeFor after Kill of its owner = %v; want the killed node (asked of the others)", got)
			}
			n.Restart(t)
			c.WaitOK(t)
			if got, err := n.Client(t).ClusterMyID(ctx).Result(); err != nil || got != id {
				t.Fatalf("node ID after Restart = %q, %v; want %q", got, err, id)
			}
			cc := c.Client(t)
			if err := cc.Set(ctx, "{rejoin}k", "v", time.Minute).Err(); err != nil {
				t.Fatalf("SET after Restart: %v", err)
			}
		})
	})
	if c == nil {
		return // skipped or failed
	}
	for _, s := range c.Nodes() {
		if !s.p.exited() {
			t.Errorf("node %s (pid %d) still running after its test's cleanup", s.Addr(), s.PID())
		}
	}
}

func TestSharedCluster(t *testing.T) {
	t.Parallel()
	// This package's TestMain does not call StopShared (its other tests do
	// not use the shared cluster), so this test, its only user, stops it.
	t.Cleanup(StopShared)
	first := SharedCluster(t)
	t.Run("checks", func(t *testing.T) {
		runClusterChecks(t, func(t *testing.T) *Cluster {
			if c := SharedCluster(t); c != first {
				t.Fatalf("SharedCluster returned %p, earlier %p", c, first)
			}
			return first
		})
	})
	// The subtests' cleanups did not stop it.
	for _, s := range first.Nodes() {
		if !s.answering() {
			t.Fatalf("shared node %s stopped after the subtests that used it ended", s.Addr())
		}
	}
	dir := first.dir
	StopShared()
	StopShared() // idempotent
	for _, s := range first.Nodes() {
		if !s.p.exited() {
			t.Errorf("shared node %s (pid %d) still running after StopShared", s.Addr(), s.PID())
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("shared cluster dir %s not removed: %v", dir, err)
	}
}

func TestStartClusterTooFew(t *testing.T) {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartCluster(tb, 2)
		t.Error("StartCluster(2) returned without failing")
	}()
	<-done
	if !strings.Contains(tb.msg, "at least 3") {
		t.Fatalf("failure message %q", tb.msg)
	}
}

func TestClusterWithoutTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, fn := range []struct {
		name  string
		start func(testing.TB) *Cluster
	}{
		{"StartCluster", func(tb testing.TB) *Cluster { return StartCluster(tb, 3) }},
		{"SharedCluster", SharedCluster},
	} {
		t.Run(fn.name+"/skips", func(t *testing.T) {
			t.Setenv(RequireEnv, "")
			defer func() {
				if !t.Skipped() {
					t.Errorf("%s without redis-cli on PATH did not skip", fn.name)
				}
			}()
			fn.start(t)
		})
		t.Run(fn.name+"/fails-when-required", func(t *testing.T) {
			t.Setenv(RequireEnv, "1")
			tb := &fatalTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				fn.start(tb)
				t.Error("returned without failing")
			}()
			<-done
			if !strings.Contains(tb.msg, RequireEnv) {
				t.Fatalf("failure message %q does not name %s", tb.msg, RequireEnv)
			}
		})
	}
}

func mustNodeFor(t *testing.T, c *Cluster, key string) *Server {
	t.Helper()
	n := c.NodeFor(key)
	if n == nil {
		t.Fatalf("NodeFor(%q) = nil", key)
	}
	return n
}

// spreadTags returns 3 hash tags ("a", "b", ...) whose keys live on 3
// different masters.
func spreadTags(t *testing.T, c *Cluster) []string {
	t.Helper()
	var tags []string
	owners := map[*Server]bool{}
	for i := 0; i < 26*26 && len(tags) < 3; i++ {
		tag := string(rune('a' + i%26))
		if i >= 26 {
			tag = string(rune('a'+i/26-1)) + tag
		}
		if n := mustNodeFor(t, c, "{"+tag+"}x"); !owners[n] {
			owners[n] = true
			tags = append(tags, tag)
		}
	}
	if len(tags) < 3 {
		t.Fatalf("found hash tags on only %d masters: %q", len(tags), tags)
	}
	return tags
}

// confirm waits for the (s)subscribe confirmation, so a publish that follows
// cannot overtake the subscription.
func confirm(t *testing.T, ps *redis.PubSub, kind, ch string) {
	t.Helper()
	v, err := ps.ReceiveTimeout(context.Background(), clusterWait)
	if err != nil {
		t.Fatalf("%s %s: %v", kind, ch, err)
	}
	if s, ok := v.(*redis.Subscription); !ok || s.Kind != kind || s.Channel != ch {
		t.Fatalf("%s %s: got %#v", kind, ch, v)
	}
}

func receive(t *testing.T, ps *redis.PubSub) *redis.Message {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		v, err := ps.ReceiveTimeout(context.Background(), time.Until(deadline))
		if err != nil {
			t.Fatalf("no message within %v: %v", clusterWait, err)
		}
		if m, ok := v.(*redis.Message); ok {
			return m
		}
	}
}
