//go:build full

package lockactor_test

// RedLock under node faults: a minority killed, a majority frozen.

import (
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
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
