package lockactor_test

import (
	"context"
	"errors"
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
