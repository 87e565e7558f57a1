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

func TestClusterRejectsNamesWithoutUsableHashTag(t *testing.T) {
	cl := redistest.SharedCluster(t)
	c := newClient(t, cl.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	for _, name := range []string{"a{}b", "}{x", "x{"} {
		if err := c.Lock(name).Lock(ctx); !errors.Is(err, lockactor.ErrInvalidArgument) {
			t.Fatalf("%q on a cluster: %v, want ErrInvalidArgument", name, err)
		}
	}
	// A user-chosen hash tag is kept: the auxiliary keys share it.
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
