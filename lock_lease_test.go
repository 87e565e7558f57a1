package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/delayline"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
)

// Tests of fixed leases (WithLease): a grant is handed out only with time
// left on it, a lease too short to be served is tried with backoff until
// the caller gives up, and a group's actors retire once its lease is over.

// Any positive lease is accepted, as Redisson accepts it; one shorter than
// a round trip can never be granted in time, and its caller must not flood
// Redis: here every command reaches the server 2ms late, so a 1ms lease
// (a microsecond, rounded up) always comes back past its end. Before,
// leases below 10ms were refused outright; before that, such a Lock sent
// thousands of acquire and release scripts a second until its ctx ended.
func TestLeaseShorterThanRoundTrip(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	slow := srv.ClientWith(t, func(o *redis.Options) {
		o.Dialer = delayline.Dialer(func(conn net.Conn) net.Conn {
			return delayline.New(conn, delayline.Delays{Write: func() time.Duration { return 2 * time.Millisecond }})
		})
	})
	c := newClient(t, slow)
	ctx := ctxFor(t, 10*time.Second)
	l := c.Lock("tiny-lease")
	before := evalshaCalls(t, admin)
	lctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	err := l.Lock(lctx, lockactor.WithLease(time.Microsecond))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with a lease shorter than the round trip = %v, want its ctx's error", err)
	}
	if ok, err := l.TryLock(ctx, lockactor.WithLease(time.Millisecond)); ok || err != nil {
		t.Fatalf("TryLock with a lease shorter than the round trip = %v, %v; want false, nil", ok, err)
	}
	// Each attempt is an acquire and the release of its late grant; the
	// attempts back off from 1ms to 128ms: some twenty scripts in 600ms.
	if n := evalshaCalls(t, admin) - before; n > 50 {
		t.Errorf("%d scripts reached Redis in 600ms of trying: the attempts do not back off", n)
	}
	if ok, err := l.TryLock(ctx, lockactor.WithLease(time.Second)); !ok || err != nil {
		t.Fatalf("TryLock with a lease longer than the round trip = %v, %v", ok, err)
	}
}

// The scenario this project started from, Redisson's own test: 100 threads
// each tryLock(wait 10s, lease 5ms) one lock and unlock it. Every one must
// acquire: a lease runs out under most holders, and the next waiter must
// neither sleep through it nor be refused the lease.
func TestManyWaitersTinyLease(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 30*time.Second)
	const n = 100
	var wg sync.WaitGroup
	var acquired, notHeld atomic.Int64
	errs := make(chan error, n)
	for range n {
		l := c.Lock("seed-scenario")
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := l.TryLock(ctx, lockactor.WithWait(10*time.Second), lockactor.WithLease(5*time.Millisecond))
			if err != nil || !ok {
				errs <- fmt.Errorf("TryLock = %v, %v", ok, err)
				return
			}
			acquired.Add(1)
			switch err := l.Unlock(ctx); {
			case errors.Is(err, lockactor.ErrNotHeld):
				notHeld.Add(1) // the 5ms lease ran out first: allowed
			case err != nil:
				errs <- fmt.Errorf("Unlock = %v", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := acquired.Load(); got != n {
		t.Fatalf("%d of %d acquired", got, n)
	}
	t.Logf("%d of %d Unlocks found the lease run out", notHeld.Load(), n)
}

// A MultiLock with a fixed lease whose round outlasts the lease must not be
// reported held: a member granted early has expired in Redis by the time the
// last member is granted. Each member checks only its own attempt's age,
// and an attempt can wait in its member's actor first (here behind another
// handle's Unlock whose reply is late). Only RedLock rounds were checked
// against their lease: MultiLock.Lock returned nil with a member already
// gone, and another Client took it (found by the torture suite's
// ghost-grant probe).
func TestMultiLockRoundLongerThanLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	slow, hook := hooked(t, srv)
	fast := newClient(t, srv.Client(t))
	late := newClient(t, slow)
	rival := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 20*time.Second)
	const lease = 300 * time.Millisecond
	other := late.Lock("ml-late")
	if err := other.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// The late member's actor is busy with other's release, whose reply
	// comes back two leases after it ran.
	hook.once(t, slow, scripts.Latched.Unlock, faultRule{delay: 2 * lease, after: true})
	unlocked := make(chan error, 1)
	go func() { unlocked <- other.Unlock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	ml := lockactor.NewMultiLock(fast.Lock("ml-early"), late.Lock("ml-late"))
	start := time.Now()
	if err := ml.Lock(ctx, lockactor.WithLease(lease)); err != nil {
		t.Fatalf("MultiLock.Lock: %v", err)
	}
	took := time.Since(start)
	if ok, err := rival.Lock("ml-early").TryLock(ctx); ok || err != nil {
		t.Fatalf("another Client's TryLock of the early member = %v, %v right after MultiLock.Lock returned (after %v): the member had expired", ok, err, took)
	}
	if err := waitErr(t, unlocked, 5*time.Second, "other's Unlock"); err != nil {
		t.Fatal(err)
	}
	if took < lease {
		t.Fatalf("MultiLock.Lock returned after %v, within the lease: the busy member was not exercised", took)
	}
}

// A MultiLock held with a fixed lease lets its coordinator (and its members'
// actors) retire once the lease is over.
func TestFixedLeaseGroupCoordinatorRetires(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t), lockactor.WithIdleActorTimeout(100*time.Millisecond))
	ctx := ctxFor(t, 20*time.Second)
	m := lockactor.NewMultiLock(c.Lock("g-a"), c.Lock("g-b"))
	if err := m.Lock(ctx, lockactor.WithLease(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n := lockactor.ActorCount(c); n < 3 {
		t.Fatalf("%d actors while held, want 3 (coordinator and two members)", n)
	}
	within(t, 3*time.Second, "every actor retired after the lease", func() bool { return lockactor.ActorCount(c) == 0 })
	if err := m.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock after the lease = %v, want ErrNotHeld", err)
	}
}
