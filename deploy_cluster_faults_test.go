//go:build full

package lockactor_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestClusterStoppedMasterSparesHealthyOnes: one master SIGSTOPped (the
// cluster keeps serving the others: full coverage not required). Asking
// whether the masters know SPUBLISH used to ask every master, synchronously,
// on the actor's goroutine (and inside the pub/sub lock), and again on
// every release until one probe succeeded: an Unlock on a healthy master
// failed after 5-10 s and the lock stayed held; a waiter on a healthy
// master could not subscribe. Now nothing waits on the stopped master but
// its own names.
func TestClusterStoppedMasterSparesHealthyOnes(t *testing.T) {
	// Parallel: its own deployment, and bounds loose enough to share the machine.
	t.Parallel()
	cl := redistest.StartCluster(t, 3, "--cluster-require-full-coverage", "no")
	names := namesOnEveryMaster(t, cl, "stopped-")
	ctx := ctxFor(t, 30*time.Second)
	ra, rb := cl.Client(t), cl.Client(t)
	for _, rdb := range []*redis.ClusterClient{ra, rb} {
		// go-redis loads a ClusterClient's slot map on its first command,
		// from nodes in turn, and would wait out the stopped one: that
		// belongs to the client's start-up, not to this test.
		if err := rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
	}
	a, b := newClient(t, ra), newClient(t, rb)
	stopped := cl.NodeFor(names[0])
	stopped.Pause(t)
	defer stopped.Resume(t)
	const bound = 2 * time.Second // each step takes milliseconds when nothing waits on the stopped master

	for _, name := range names[1:] {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			l := a.Lock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock after %v: %v", time.Since(start), err)
			}
			if d := time.Since(start); d > bound {
				t.Fatalf("Lock+Unlock took %v", d)
			}
			if n := cl.NodeFor(name).Client(t).Exists(ctx, name).Val(); n != 0 {
				t.Fatal("the lock is still held after Unlock")
			}
			// A waiter (which subscribes) is woken by the release.
			holder, waiter := a.Lock(name), b.Lock(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if d := wakeAfter(t, func() error { return waiter.Lock(wctx) }, func() error { return holder.Unlock(ctx) }); d > bound {
				t.Fatalf("waiter woken %v after Unlock", d)
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// otherMaster is a master of cl that does not own key's slot.
func otherMaster(t *testing.T, cl *redistest.Cluster, key string) *redistest.Server {
	t.Helper()
	from := cl.MasterFor(key)
	for _, m := range cl.Masters() {
		if m != from {
			return m
		}
	}
	t.Fatal("no other master")
	return nil
}

// TestClusterSlotMigrationRetriesTryAgain: while a lock's slot is MIGRATING
// (IMPORTING on its next owner), every lock script on it is answered
// TRYAGAIN (its channel key never exists, so the keys are never all in one
// place) or ASK. That went straight back to the caller: Unlock, TryLock and
// Lock failed with "TRYAGAIN" and queued waiters were drained with it. A
// TRYAGAIN means the script did not run; as Redisson does, the call is
// retried, within its ctx, until the migration ends.
func TestClusterSlotMigrationRetriesTryAgain(t *testing.T) {
	// Parallel: its own deployment, and bounds loose enough to share the machine.
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	a, b := newClient(t, cl.Client(t)), newClient(t, cl.Client(t))
	ctx := ctxFor(t, 30*time.Second)
	const name = "{migrating}"
	holder := a.Lock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	finish := cl.BeginSlotMove(t, name, otherMaster(t, cl, name))
	const open = 500 * time.Millisecond // how long the slot stays half-moved
	moved := make(chan error, 1)
	go func() {
		time.Sleep(open)
		moved <- finish()
	}()
	start := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on a migrating slot: %v", err)
	}
	if ok, err := b.Lock(name).TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock on a free lock of a migrating slot: %v, %v", ok, err)
	}
	waiter := a.Lock(name + "w")
	if err := waiter.Lock(ctx); err != nil {
		t.Fatalf("Lock on a migrating slot: %v", err)
	}
	if d := time.Since(start); d < open/2 {
		t.Logf("the calls ended %v after the migration began: did the slot migrate at all?", d)
	}
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClusterMovedCallKeepsReplicaSync: a call answered MOVED (its slot had
// moved to another master) was run again through the cluster client
// without WAIT, so with the new master's replica frozen TryLock granted a
// hold no replica had. The re-run goes to the new master followed by its
// WAIT, and a grant too few replicas confirmed is undone.
func TestClusterMovedCallKeepsReplicaSync(t *testing.T) {
	// Parallel: its own deployment, and bounds loose enough to share the machine.
	t.Parallel()
	cl := redistest.StartClusterReplicas(t, 3)
	rdb := cl.Client(t)
	c := newClient(t, rdb, lockactor.WithReplicaSync(-1, 300*time.Millisecond))
	ctx := ctxFor(t, 30*time.Second)
	first := "{moved-sync}1"
	if ok, err := c.Lock(first).TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock before the move: %v, %v", ok, err)
	}
	to := otherMaster(t, cl, first)
	cl.MoveSlot(t, first, to)
	replica := cl.ReplicaOf(to)
	replica.Pause(t)
	defer replica.Resume(t)
	// The Client's view of the slots is still the old one: the script goes
	// to the old master first and is answered MOVED.
	ok, err := c.Lock("{moved-sync}2").TryLock(ctx)
	if ok || !errors.Is(err, lockactor.ErrNotReplicated) {
		t.Fatalf("TryLock re-run after MOVED with the new master's replica frozen: %v, %v; want ErrNotReplicated", ok, err)
	}
}

// TestClusterNodeBackAfterAMinute: the real sequence behind
// TestBatcherFollowsNewNodeClient (package redisio). A master dies, its
// replica takes over, go-redis closes the dead node's client a minute later
// (a fixed timer in go-redis), the node comes back and is made master
// again: the Client must use the new client go-redis made for it. Before,
// the batcher kept the closed one and every Lock on the node's names hung
// until its ctx. Meanwhile the names must work on the promoted replica:
// pipelines bypass go-redis's error handling, so its slot map stayed stale
// for up to its one-minute reload interval and every Lock hit the dead
// node. It takes over a minute, so it runs only with LOCKACTOR_TORTURE set.
func TestClusterNodeBackAfterAMinute(t *testing.T) {
	if os.Getenv(tortureEnv) == "" {
		t.Skip("takes over a minute; set " + tortureEnv + " to run it")
	}
	cl := redistest.StartClusterReplicas(t, 3)
	c := newClient(t, cl.Client(t))
	ctx := ctxFor(t, 3*time.Minute)
	const name = "{comeback}"
	lockUnlockIn := func(d time.Duration) error {
		lctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return lockUnlock(lctx, c.Lock(name))
	}
	if err := lockUnlockIn(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	gone := killOwner(t, cl, name)
	// go-redis reloads its slot map as commands meet MOVED or every 10 s
	// of use; the dead node's client is closed a minute after the first
	// map without it.
	until := time.Now().Add(75 * time.Second)
	for time.Now().Before(until) {
		if err := lockUnlockIn(5 * time.Second); err != nil {
			t.Errorf("Lock and Unlock while the node is gone (its replica serves the slot): %v", err)
		}
		time.Sleep(2 * time.Second)
	}
	gone.Restart(t)
	cl.WaitOK(t)
	within(t, 20*time.Second, "the node that came back replicates the new master", func() bool {
		return cl.ReplicaOf(cl.MasterFor(name)) == gone
	})
	if m := cl.Failover(t, name); m != gone {
		t.Fatalf("the failover made %s master, not the node that came back (%s)", m.Addr(), gone.Addr())
	}
	if err := lockUnlockIn(10 * time.Second); err != nil {
		t.Fatalf("Lock and Unlock on the node that came back: %v", err)
	}
}

// TestClusterCrashedMasterNamesMoveToReplica: a master is killed and its
// replica promoted. Pipelines go to node clients directly, so go-redis
// never saw their connection errors and kept its slot map (reloaded once a
// minute by default): every Lock on the dead master's names failed or hung
// for up to a minute. A refused dial now has go-redis reload the map, and
// the call, which was never sent, goes to the new master.
func TestClusterCrashedMasterNamesMoveToReplica(t *testing.T) {
	// Parallel: its own deployment, and bounds loose enough to share the machine.
	t.Parallel()
	cl := redistest.StartClusterReplicas(t, 3)
	c := newClient(t, cl.Client(t))
	ctx := ctxFor(t, 30*time.Second)
	const name = "{crashed}"
	l := c.Lock(name)
	if err := lockUnlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	killOwner(t, cl, name)
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := l.Lock(lctx); err != nil {
		t.Fatalf("Lock after the failover: %v (after %v)", err, time.Since(start))
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Lock+Unlock on the promoted replica took %v", d)
	}
}

// killOwner kills the master of name's slot and waits until its replica
// serves the slot; it returns the killed node.
func killOwner(t *testing.T, cl *redistest.Cluster, name string) *redistest.Server {
	t.Helper()
	gone := cl.MasterFor(name)
	gone.Kill(t)
	within(t, 20*time.Second, "the replica took over", func() bool {
		m := cl.MasterFor(name)
		return m != nil && m != gone
	})
	return gone
}
