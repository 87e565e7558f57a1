//go:build full

package lockactor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestReplicaSyncRenewalsMustBeConfirmed: with replica sync on, a renewal
// that too few replicas confirmed extends nothing. A failover may lose it
// (the replica that is promoted never had it), so the hold's end stays
// where the last confirmed grant or renewal put it, and Lost closes then:
// the holder learns it may have lost the lock before Redis's copy that
// survives a failover could let another owner in. Extend fails the same
// way, with ErrNotReplicated. Once the replica answers again, holds
// taken afterwards are renewed as before.
func TestReplicaSyncRenewalsMustBeConfirmed(t *testing.T) {
	const watchdog = 1500 * time.Millisecond
	pair := redistest.StartReplicated(t)
	ctx := ctxFor(t, 30*time.Second)
	c := newClient(t, pair.Master().Client(t), lockactor.WithReplicaSync(1, 200*time.Millisecond),
		lockactor.WithWatchdogTimeout(watchdog))
	held := c.Lock("renew-unconfirmed")
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	fixed := c.Lock("extend-unconfirmed")
	if err := fixed.Lock(ctx, lockactor.WithLease(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(watchdog / 2) // a renewal or two confirmed
	pair.Replica().Pause(t)
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			pair.Replica().Resume(t)
		}
	}()

	if err := fixed.Extend(ctx, 10*time.Second); !errors.Is(err, lockactor.ErrNotReplicated) {
		t.Errorf("Extend while the replica is stopped: %v, want ErrNotReplicated", err)
	}
	select {
	case <-held.Lost():
		after := time.Since(paused)
		t.Logf("Lost closed %v after the replica stopped (watchdog %v)", after.Round(time.Millisecond), watchdog)
		// The last confirmed renewal was at most a third of the watchdog
		// before the stop: Lost may not close much sooner than that.
		if after < watchdog/2 {
			t.Errorf("Lost closed %v after the stop: before the last confirmed renewal's lease ran out", after)
		}
	case <-time.After(3 * watchdog):
		t.Fatalf("Lost still open %v after the replica stopped: unconfirmed renewals extended the hold", 3*watchdog)
	}
	pair.Replica().Resume(t)
	resumed = true

	again := c.Lock("renewed-after-resume")
	if err := again.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-again.Lost():
		t.Fatalf("a hold taken after the replica came back was lost")
	case <-time.After(2 * watchdog):
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
