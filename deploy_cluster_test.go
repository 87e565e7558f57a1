//go:build full

package lockactor_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// namesOnEveryMaster finds one name per master of cl, with prefix.
func namesOnEveryMaster(t *testing.T, cl *redistest.Cluster, prefix string) []string {
	t.Helper()
	seen := map[*redistest.Server]bool{}
	var names []string
	for i := 0; len(names) < len(cl.Nodes()) && i < 1000; i++ {
		name := fmt.Sprint(prefix, i)
		node := cl.NodeFor(name)
		if node != nil && !seen[node] {
			seen[node] = true
			names = append(names, name)
		}
	}
	if len(names) < len(cl.Nodes()) {
		t.Fatalf("found names on only %d masters", len(names))
	}
	return names
}

func TestClusterWaitersWokenBySharded(t *testing.T) {
	cl := redistest.SharedCluster(t)
	a := newClient(t, cl.Client(t))
	b := newClient(t, cl.Client(t))
	ctx := ctxFor(t, 60*time.Second)

	for _, name := range namesOnEveryMaster(t, cl, "cl-lock-") {
		t.Run("Lock/"+name, func(t *testing.T) {
			holder, waiter := a.Lock(name), b.Lock(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			d := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error {
				// While it waits, its channel is a shard channel on the owner.
				chans := cl.NodeFor(name).Client(t).PubSubShardChannels(ctx, "*").Val()
				if !contains(chans, "redisson_lock__channel:{"+name+"}") {
					return fmt.Errorf("waiter not on a shard channel of the owning master: %v", chans)
				}
				return holder.Unlock(ctx)
			})
			if d > 300*time.Millisecond {
				t.Fatalf("woken %v after Unlock", d)
			}
			_ = waiter.Unlock(ctx)
		})
	}
	for _, name := range namesOnEveryMaster(t, cl, "cl-fair-") {
		t.Run("FairLock/"+name, func(t *testing.T) {
			holder, waiter := a.FairLock(name), b.FairLock(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if d := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error { return holder.Unlock(ctx) }); d > 300*time.Millisecond {
				t.Fatalf("woken %v after Unlock", d)
			}
			_ = waiter.Unlock(ctx)
		})
	}
	for _, name := range namesOnEveryMaster(t, cl, "cl-sem-") {
		t.Run("Semaphore/"+name, func(t *testing.T) {
			sa, sb := a.Semaphore(name), b.Semaphore(name)
			if ok, err := sa.TrySetPermits(ctx, 1); !ok || err != nil {
				t.Fatal(ok, err)
			}
			if err := sa.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if d := wakeAfter(t, func() error { return sb.Acquire(ctx, 1) }, func() error { return sa.Release(ctx, 1) }); d > 300*time.Millisecond {
				t.Fatalf("woken %v after Release", d)
			}
		})
	}
}

// TestClusterRejectsNamesWithoutUsableHashTag: on a Cluster every key and
// channel a name derives must share its slot. "a}b" once locked fine and
// could never be unlocked (its channel "...:{a}b}" hashes to "a", CROSSSLOT);
// every kind, and group members, now refuse such names before sending.
func TestClusterRejectsNamesWithoutUsableHashTag(t *testing.T) {
	cl := redistest.SharedCluster(t)
	c := newClient(t, cl.Client(t))
	ctx := ctxFor(t, 20*time.Second)
	kinds := []struct {
		kind string
		try  func(name string) error
	}{
		{"Lock", func(n string) error { _, err := c.Lock(n).TryLock(ctx); return err }},
		{"FairLock", func(n string) error { _, err := c.FairLock(n).TryLock(ctx); return err }},
		{"FencedLock", func(n string) error { _, err := c.FencedLock(n).TryLock(ctx); return err }},
		{"ReadLock", func(n string) error { _, err := c.ReadWriteLock(n).ReadLock().TryLock(ctx); return err }},
		{"WriteLock", func(n string) error { _, err := c.ReadWriteLock(n).WriteLock().TryLock(ctx); return err }},
		{"Semaphore", func(n string) error { _, err := c.Semaphore(n).TrySetPermits(ctx, 1); return err }},
		{"SemaphoreRelease", func(n string) error { return c.Semaphore(n).Release(ctx, 1) }},
		{"MultiLock", func(n string) error {
			_, err := lockactor.NewMultiLock(c.Lock("cl-ok-member"), c.Lock(n)).TryLock(ctx)
			return err
		}},
		{"RedLock", func(n string) error {
			_, err := lockactor.NewRedLock(c.Lock(n), c.Lock("cl-ok-1"), c.Lock("cl-ok-2")).TryLock(ctx)
			return err
		}},
	}
	names := []struct {
		name string
		ok   bool
	}{
		{"a}b", false}, {"}", false}, {"a{}b", false}, {"}{x", false}, {"x{", false},
		{"}{x}", true},
		{"orders{eu}", true}, {"a}b{c}", true}, {"plain", true},
	}
	for _, k := range kinds {
		for _, n := range names {
			t.Run(k.kind+"/"+n.name, func(t *testing.T) {
				name := n.name
				if n.ok {
					name = n.name + "-" + k.kind // fresh state per kind, same validity
				}
				err := k.try(name)
				if !n.ok {
					if !errors.Is(err, lockactor.ErrInvalidArgument) {
						t.Fatalf("%q: %v, want ErrInvalidArgument", name, err)
					}
					return
				}
				if errors.Is(err, lockactor.ErrInvalidArgument) {
					t.Fatalf("%q refused: %v", name, err)
				}
			})
		}
	}
	// A user-chosen hash tag is kept: the auxiliary keys share it, and a
	// full lock/unlock works.
	l := c.FairLock("orders{eu}")
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("tagged name: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// namesOnOneMaster finds n names in different slots owned by one master.
func namesOnOneMaster(t *testing.T, cl *redistest.Cluster, prefix string, n int) (*redistest.Server, []string) {
	t.Helper()
	var node *redistest.Server
	var names []string
	for i := 0; len(names) < n && i < 10000; i++ {
		name := fmt.Sprint(prefix, i)
		at := cl.NodeFor(name)
		if node == nil {
			node = at
		}
		if at == node {
			names = append(names, name)
		}
	}
	if len(names) < n {
		t.Fatalf("found %d names on one master, want %d", len(names), n)
	}
	return node, names
}

// TestClusterShardedResubscribeAfterKill: all shard channels of one master
// share one connection. go-redis resubscribes a broken PubSub in ONE
// multi-slot SSUBSCRIBE, which Redis refuses (CROSSSLOT): every waiter on
// that master then slept until its holder's TTL. The channels must come
// back one slot at a time, and the waiters be woken by the next Unlock.
func TestClusterShardedResubscribeAfterKill(t *testing.T) {
	cl := redistest.SharedCluster(t)
	a := newClient(t, cl.Client(t))
	b := newClient(t, cl.Client(t))
	ctx := ctxFor(t, 60*time.Second)
	node, names := namesOnOneMaster(t, cl, "cl-kill-", 3)
	nrdb := node.Client(t)

	holders := make([]*lockactor.Lock, len(names))
	woken := make(chan string, len(names))
	for i, name := range names {
		holders[i] = a.Lock(name)
		if err := holders[i].Lock(ctx); err != nil {
			t.Fatal(err)
		}
		w := b.Lock(name)
		go func() {
			// Errors come back on woken: a goroutine must not report after
			// the test has ended.
			if err := w.Lock(ctx); err != nil {
				woken <- fmt.Sprintf("%s: %v", name, err)
				return
			}
			woken <- ""
			_ = w.Unlock(ctx)
		}()
	}
	channels := make([]string, len(names))
	for i, name := range names {
		channels[i] = "redisson_lock__channel:{" + name + "}"
	}
	subscribed := func() bool {
		counts := nrdb.PubSubShardNumSub(ctx, channels...).Val()
		for _, ch := range channels {
			if counts[ch] != 1 {
				return false
			}
		}
		return true
	}
	within(t, 5*time.Second, "waiters subscribed", subscribed)
	if n, err := nrdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n == 0 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v", n, err)
	}
	time.Sleep(50 * time.Millisecond)
	within(t, 5*time.Second, "every shard channel resubscribed", subscribed)
	start := time.Now()
	for _, h := range holders {
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range names {
		select {
		case err := <-woken:
			if err != "" {
				t.Fatalf("waiter %s", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("a waiter slept on a free lock for 5s after the unlocks")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("waiters woken %v after the unlocks", d)
	}
}
