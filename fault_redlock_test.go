//go:build full

package lockactor_test

// RedLock under node faults: a minority killed, a majority frozen.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestRedLockAcquiresWithTwoOfFiveKilled(t *testing.T) {
	servers, clients := redlockNodes(t, 5)
	ctx := ctxFor(t, 20*time.Second)
	servers[1].Kill(t)
	servers[3].Kill(t)
	rl, _ := redLockOn(clients, "rl")
	ok, err := rl.TryLock(ctx, loadedWait)
	if !ok || err != nil {
		t.Fatalf("TryLock with 3 of 5 alive = %v, %v", ok, err)
	}
	if v := rl.Validity(); v <= 0 || v > 30*time.Second {
		t.Fatalf("Validity = %v", v)
	}
	for _, i := range []int{0, 2, 4} {
		if n := servers[i].Client(t).Exists(ctx, "rl").Val(); n != 1 {
			t.Fatalf("node %d holds no key", i)
		}
	}
	if err := rl.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with 3 of 5 alive = %v", err)
	}
	if rl.Validity() != 0 {
		t.Fatal("Validity after Unlock is not 0")
	}
}

func TestRedLockFailsWithThreeOfFivePausedAndLeavesNoKey(t *testing.T) {
	servers, clients := redlockNodes(t, 5)
	ctx := ctxFor(t, 30*time.Second)
	for _, i := range []int{0, 2, 4} {
		servers[i].Pause(t)
	}
	rl, _ := redLockOn(clients, "rl-paused")
	ok, err := rl.TryLock(ctx)
	if ok {
		t.Fatal("RedLock acquired with 3 of 5 nodes frozen")
	}
	if err != nil && !errors.Is(err, lockactor.ErrNoQuorum) {
		t.Fatalf("TryLock = %v, want false or ErrNoQuorum", err)
	}
	time.Sleep(500 * time.Millisecond) // frozen well within go-redis's read timeout
	for _, i := range []int{0, 2, 4} {
		servers[i].Resume(t)
	}
	// The frozen nodes apply the grants they had queued; their actors see
	// the round abandoned and give each one back.
	within(t, 5*time.Second, "no key left on any node", func() bool {
		for _, s := range servers {
			if s.Client(t).Exists(ctx, "rl-paused").Val() != 0 {
				return false
			}
		}
		return true
	})
}

func TestRedLockWatchdogRenewsAndLosesMajority(t *testing.T) {
	const wd = 900 * time.Millisecond
	servers, clients := redlockNodes(t, 3, lockactor.WithWatchdogTimeout(wd))
	ctx := ctxFor(t, 20*time.Second)
	rl, members := redLockOn(clients, "rl-wd")
	if err := rl.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * wd)
	if v := rl.Validity(); v <= 0 {
		t.Fatalf("Validity after 3 watchdog periods = %v, want renewed", v)
	}
	for i, s := range servers {
		if d := s.Client(t).PTTL(ctx, "rl-wd").Val(); d <= 0 {
			t.Fatalf("node %d: TTL %v after 3 watchdog periods", i, d)
		}
	}
	servers[0].Kill(t)
	servers[1].Kill(t)
	for i, l := range members {
		select {
		case <-l.Lost():
		case <-time.After(wd + 2*time.Second):
			t.Fatalf("member %d's Lost did not close after the majority died", i)
		}
	}
	if rl.Validity() != 0 {
		t.Fatal("Validity > 0 after losing the majority")
	}
}

// A RedLock member that answers after the node timeout, when the RedLock was
// taken on the others, must not keep its grant for the lease: the member's
// actor sees the request abandoned and gives the grant back, also when the
// reply is lost to go-redis's read timeout and the grant is learnt from the
// latch. Another owner can then take that node's lock shortly after it
// wakes, while the RedLock still holds.
func TestRedLockLateMemberGrantIsReleased(t *testing.T) {
	tests := []struct {
		name        string
		pause       time.Duration
		readTimeout time.Duration // go-redis's; 0: default (3s)
		settled     []string      // how the late node's latch may end
	}{
		// The reply arrives: the grant is applied, then released.
		{"answer after the node timeout", 300 * time.Millisecond, 0, []string{":i1"}},
		// The reply is lost: the settlement finds the grant and releases
		// it, or cancels the request before it runs (whichever the woken
		// server runs first).
		{"reply lost to the read timeout", 1500 * time.Millisecond, 500 * time.Millisecond, []string{":i1", ":c"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers := redistest.StartN(t, 3)
			clients := make([]*lockactor.Client, len(servers))
			for i, s := range servers {
				rdb := s.ClientWith(t, func(o *redis.Options) {
					o.MaxRetries = -1
					o.DialerRetries = 1
					if tt.readTimeout > 0 {
						o.ReadTimeout = tt.readTimeout
					}
				})
				clients[i] = newClient(t, rdb)
			}
			ctx := ctxFor(t, 20*time.Second)
			name := "rl-late-" + string(rune('a'+i))
			rl, _ := redLockOn(clients, name)
			late := servers[2]
			late.Pause(t)
			if ok, err := rl.TryLock(ctx, loadedWait); !ok || err != nil {
				t.Fatalf("RedLock with 1 of 3 frozen = %v, %v", ok, err)
			}
			time.Sleep(tt.pause)
			late.Resume(t)
			// The late node settles the queued request: it applies the grant
			// and the member's actor gives it back (the latch then records
			// the release, "<seq>:i1"), or the request is cancelled before
			// it ran ("<seq>:c").
			lrdb := late.Client(t)
			var settled string
			within(t, 3*time.Second, "the late request settled", func() bool {
				for _, k := range lrdb.Keys(ctx, "lockactor_latch:*").Val() {
					v := lrdb.Get(ctx, k).Val()
					for _, want := range tt.settled {
						if strings.HasSuffix(v, want) {
							settled = v
							return true
						}
					}
				}
				return false
			})
			t.Logf("the late node's latch: %q", settled)

			other := newClient(t, late.Client(t)).Lock(name)
			took := within(t, 3*time.Second, "the late node's lock taken by another owner", func() bool {
				ok, err := other.TryLock(ctx)
				if err != nil {
					t.Fatalf("other TryLock: %v", err)
				}
				return ok
			})
			t.Logf("the late node was free %v after the late request settled", took)
			if rl.Validity() <= 0 {
				t.Fatal("the RedLock lost its validity")
			}
			if err := other.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := rl.Unlock(ctx); err != nil {
				t.Fatalf("RedLock Unlock: %v", err)
			}
		})
	}
}
