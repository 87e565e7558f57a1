//go:build full

package lockactor_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
	"github.com/redis/go-redis/v9"
)

// A semaphore request whose reply was lost and whose settlement could not
// reach Redis for longer than its latch record lives is never settled as
// "did not run" (that sent a Release again: 3 permits of 2). The count may
// only err on the side of fewer permits.
func TestSemaphoreSettlementAfterLatchExpired(t *testing.T) {
	// Parallel: its own servers, and it mostly waits for records to expire.
	t.Parallel()
	tests := []struct {
		name   string
		script *redis.Script
		call   func(ctx context.Context, s *lockactor.Semaphore) error
		most   int // permits that may be available after it
	}{
		{"release", scripts.Latched.SemaphoreRelease, func(ctx context.Context, s *lockactor.Semaphore) error { return s.Release(ctx, 1) }, 2},
		// The caller is told of the lost reply and holds one permit; the
		// other may be lost to the semaphore (fewer, never more).
		{"acquire", scripts.Latched.SemaphoreAcquire, func(ctx context.Context, s *lockactor.Semaphore) error { return s.Acquire(ctx, 1) }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb, hook := hooked(t, srv)
			c := newClient(t, rdb, lockactor.WithLatchKeep(300*time.Millisecond))
			ctx := ctxFor(t, 20*time.Second)
			s := c.Semaphore("sem-outage")
			if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
				t.Fatalf("TrySetPermits = %v, %v", ok, err)
			}
			if err := s.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			hook.once(t, rdb, tc.script, faultRule{lose: true})
			resolve := hook.add(&faultRule{match: evalOf(scripts.Resolve.Hash()), times: -1, refuse: true})
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_ = tc.call(cctx, s)
			cancel()
			time.Sleep(time.Second) // longer than the latch record lives
			hook.stop(resolve)
			time.Sleep(2 * time.Second) // settled, and anything re-sent has run
			n, err := s.AvailablePermits(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n > tc.most {
				t.Fatalf("%d permits available of 2, want at most %d: a request that ran was applied twice", n, tc.most)
			}
		})
	}
}
