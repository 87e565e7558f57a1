//go:build full

package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestClusterRedis6StandIn: a Cluster whose servers lack SPUBLISH and
// SSUBSCRIBE (Redis 7 with both renamed away answers as Redis 6 does). The
// Client used to choose SPUBLISH for every Cluster client: the release
// script deleted the key and then failed, so Unlock reported an error for a
// lock it had released and nobody was woken. Now the masters are asked once
// and the classic commands used.
func TestClusterRedis6StandIn(t *testing.T) {
	cl := redistest.StartCluster(t, 3, "--rename-command", "SPUBLISH", "", "--rename-command", "SSUBSCRIBE", "")
	a, b := newClient(t, cl.Client(t)), newClient(t, cl.Client(t))
	ctx := ctxFor(t, 30*time.Second)
	for _, name := range namesOnEveryMaster(t, cl, "r6-") {
		holder, waiter := a.Lock(name), b.Lock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		d := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error { return holder.Unlock(ctx) })
		if d > 500*time.Millisecond {
			t.Fatalf("%s: waiter woken %v after Unlock", name, d)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClusterSlotMovesKeepWaitersWoken: a waiter's shard channel lives on the
// master that owns its slot. When the slot moves (a resharding, or a replica
// promoted by CLUSTER FAILOVER), Redis 7 drops the subscription with a
// SUNSUBSCRIBE that go-redis's Channel() swallows: the waiter then slept
// until its holder's TTL. The subscription must follow the slot, and the
// holder's Unlock wake the waiter.
func TestClusterSlotMovesKeepWaitersWoken(t *testing.T) {
	// Parallel: its own deployment, and bounds loose enough to share the machine.
	t.Parallel()
	cl := redistest.StartClusterReplicas(t, 3)
	a := newClient(t, cl.Client(t))
	b := newClient(t, cl.Client(t))
	ctx := ctxFor(t, 120*time.Second)

	moves := []struct {
		name string
		move func(t *testing.T, key string)
	}{
		{"reshard", func(t *testing.T, key string) {
			from := cl.MasterFor(key)
			var to *redistest.Server
			for _, m := range cl.Masters() {
				if m != from {
					to = m
					break
				}
			}
			cl.MoveSlot(t, key, to)
		}},
		{"failover", func(t *testing.T, key string) { cl.Failover(t, key) }},
	}
	t.Run("replicaSync", func(t *testing.T) {
		// WAIT goes to the key's master with the script; a frozen replica
		// makes the grant unconfirmed, undone and reported.
		name := "cl-synced"
		master := cl.MasterFor(name)
		if ok, err := a.Lock(name).TryLock(ctx); !ok || err != nil {
			t.Fatalf("TryLock on a replicated cluster: %v, %v", ok, err)
		}
		if s := master.Client(t).Info(ctx, "commandstats").Val(); !strings.Contains(s, "cmdstat_wait:") {
			t.Fatalf("no WAIT reached the key's master:\n%s", s)
		}
		replica := cl.ReplicaOf(master)
		replica.Pause(t)
		_, err := a.Lock(name + "-frozen").TryLock(ctx)
		replica.Resume(t)
		if !errors.Is(err, lockactor.ErrNotReplicated) {
			t.Fatalf("TryLock with the slot's replica frozen: %v, want ErrNotReplicated", err)
		}
	})
	for _, mv := range moves {
		t.Run(mv.name, func(t *testing.T) {
			name := "moved-" + mv.name
			holder, waiter := a.Lock(name), b.Lock(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			channel := "redisson_lock__channel:{" + name + "}"
			// The waiter waits through the move; its error comes back on a
			// channel, so it never reports after the test has ended.
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			woken := make(chan error, 1)
			go func() { woken <- waiter.Lock(wctx) }()
			time.Sleep(300 * time.Millisecond)
			mv.move(t, name)
			owner := cl.MasterFor(name).Client(t)
			within(t, 10*time.Second, "the waiter subscribed on the slot's new master", func() bool {
				return owner.PubSubShardNumSub(ctx, channel).Val()[channel] == 1
			})
			select {
			case <-holder.Lost():
				t.Fatal("the holder lost its lock when its slot moved")
			case err := <-woken:
				t.Fatalf("the waiter returned while the holder held: %v", err)
			default:
			}
			unlocked := time.Now()
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-woken:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter was not woken within 10s of the Unlock")
			}
			if d := time.Since(unlocked); d > time.Second {
				t.Fatalf("waiter woken %v after Unlock", d)
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestClusterFrozenMasterDelaysOnlyItsNames: renewals go out per master, so
// a frozen master holds back only the renewals of its own names. Before,
// one renewal pipeline spanned every master and waited for the frozen one:
// holds on healthy masters went unconfirmed past their lease, and their
// Lost closed.
func TestClusterFrozenMasterDelaysOnlyItsNames(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	const wd = 1200 * time.Millisecond // renewal every 400 ms
	c := newClient(t, cl.Client(t), lockactor.WithWatchdogTimeout(wd))
	ctx := ctxFor(t, 30*time.Second)
	names := namesOnEveryMaster(t, cl, "frozen-")
	holds := make([]*lockactor.Lock, len(names))
	for i, name := range names {
		holds[i] = c.Lock(name)
		if err := holds[i].Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	frozen := cl.NodeFor(names[0])
	// Shorter than the cluster's 2 s node timeout, so the cluster stays ok;
	// longer than the lease.
	frozen.Pause(t)
	time.Sleep(1600 * time.Millisecond)
	frozen.Resume(t)
	for i, name := range names[1:] {
		select {
		case <-holds[i+1].Lost():
			t.Errorf("%s, on a healthy master, was lost while another master was frozen", name)
		default:
		}
	}
	select {
	case <-holds[0].Lost():
	default:
		t.Errorf("%s, on the frozen master, did not see Lost after its lease ran out unconfirmed", names[0])
	}
}

// TestClusterHandoffDuringMigration: a holder releases while its slot is
// MIGRATING and a waiter of its own Client is queued, so the release hands
// the lock over in one script. That script used to delete the hash (its
// only field) before writing the next owner's, and the source node aborts
// a script at a write to a key it no longer has: the lock was left free,
// the holder's Unlock said ErrNotHeld, and a waiter of another Client could
// take the lock from the one just handed it. Unlock must succeed, and no
// two owners may hold at once.
func TestClusterHandoffDuringMigration(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	a := newClient(t, cl.Client(t), lockactor.WithWatchdogTimeout(2*time.Second))
	b := newClient(t, cl.Client(t), lockactor.WithWatchdogTimeout(2*time.Second))
	var inside, overlaps atomic.Int32
	enter := func() {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(2 * time.Millisecond)
		inside.Add(-1)
	}
	for round := range 3 {
		name := fmt.Sprintf("{handoff-migrating-%d}", round)
		ctx := ctxFor(t, 20*time.Second)
		holder := a.Lock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		inside.Add(1)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, c := range []*lockactor.Client{a, b, b} { // one local waiter: the hand-off's target
			l := c.Lock(name)
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					wctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
					err := l.Lock(wctx, lockactor.WithLease(5*time.Second))
					cancel()
					if err == nil {
						enter()
						if err := l.Unlock(ctx); err != nil {
							t.Errorf("waiter's Unlock: %v", err)
						}
					}
				}
			})
		}
		time.Sleep(200 * time.Millisecond) // the waiters queue
		finish := cl.BeginSlotMove(t, name, otherMaster(t, cl, name))
		time.Sleep(300 * time.Millisecond)
		inside.Add(-1)
		unlocked := make(chan error, 1)
		go func() { unlocked <- holder.Unlock(ctx) }()
		time.Sleep(300 * time.Millisecond)
		if err := finish(); err != nil {
			t.Fatal(err)
		}
		if err := <-unlocked; err != nil {
			t.Errorf("round %d: the holder's Unlock during the migration: %v", round, err)
		}
		time.Sleep(300 * time.Millisecond) // the waiters take turns on the new master
		close(stop)
		wg.Wait()
	}
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d entries found another owner inside", n)
	}
}
