package lockactor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
)

// TestNoQuorumErrorCarriesMemberErrors: a member that fails inside a
// RedLock round reaches the caller as a *lockactor.MemberError inside an
// ErrNoQuorum error, and a member whose Client was closed matches
// lockactor.ErrClosed through it.
func TestNoQuorumErrorCarriesMemberErrors(t *testing.T) {
	_, clients := redlockNodes(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	rl, _ := redLockOn(clients, "rl-errors")
	for _, c := range clients[1:] {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ok, err := rl.TryLock(ctx)
	if ok || !errors.Is(err, lockactor.ErrNoQuorum) {
		t.Fatalf("TryLock with 2 of 3 Clients closed = %v, %v; want ErrNoQuorum", ok, err)
	}
	var me *lockactor.MemberError
	if !errors.As(err, &me) || me.Name != "rl-errors" {
		t.Fatalf("errors.As(%v, *MemberError) = %v, %+v", err, errors.As(err, &me), me)
	}
	if !errors.Is(err, lockactor.ErrClosed) {
		t.Fatalf("a closed member's error %v does not match ErrClosed", err)
	}
}
