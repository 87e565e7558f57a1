package lockactor_test

// The lock suite runs against real redis-server processes started by
// internal/redistest (miniredis only when redis-server is missing and
// LOCKACTOR_REQUIRE_REDIS is not 1).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial failures in fault tests are expected
	if addr := os.Getenv(chaosEnv); addr != "" {
		os.Exit(chaosChild(addr)) // a lock-holder process of the chaos test
	}
	if addr := os.Getenv(permitChildEnv); addr != "" {
		os.Exit(permitChild(addr)) // a permit holder that is killed
	}
	code := m.Run()
	redistest.StopShared() // the package's one Redis Cluster, if a test started it
	if code == 0 {
		err := goleak.Find(
			// go-redis keeps dialling a dead node in the background for about
			// a second after repeated failures, even after Close (measured
			// with go-redis v9.23).
			goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
			// go-redis's NewFailoverClusterClient never closes its sentinel
			// subscription (ClusterClient.Close does not reach it; read in
			// v9.23's sentinel.go): its listener and that PubSub's channel
			// goroutines outlive the client.
			goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*sentinelFailover).listen"),
			goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initMsgChan.func1"),
			goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initHealthCheck.func1"),
		)
		if err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// newClient starts a lockactor Client on rdb, closed when the test ends.
func newClient(t testing.TB, rdb redis.UniversalClient, opts ...lockactor.Option) *lockactor.Client {
	t.Helper()
	c, err := lockactor.New(rdb, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ctxFor is a context that ends after d or with the test.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// within fails the test unless cond holds before d runs out; it returns how
// long that took.
func within(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// wakeAfter runs wait in a goroutine, lets it block (300 ms: queued and
// subscribed), calls release and returns how long after release wait
// returned. Holders use the default 30 s lease, so a wake within a few
// hundred milliseconds can only come from the release message.
func wakeAfter(t *testing.T, wait func() error, release func() error) time.Duration {
	t.Helper()
	type woke struct {
		at  time.Time
		err error
	}
	// The waiter reports through got, never through t: it may still be
	// waiting when a failed release ends the test.
	got := make(chan woke, 1)
	go func() {
		err := wait()
		got <- woke{time.Now(), err}
	}()
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	if err := release(); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		if w.err != nil {
			t.Errorf("wait: %v", w.err)
		}
		return w.at.Sub(released)
	case <-time.After(10 * time.Second):
		t.Fatal("waiter never woke")
		return 0
	}
}

func TestReentrancyLayout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb, lockactor.WithWatchdogTimeout(5*time.Second))
	ctx := ctxFor(t, 10*time.Second)
	l := c.Lock("orders")
	field := fmt.Sprintf("%s:", c.ID())

	for want := 1; want <= 3; want++ {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock #%d: %v", want, err)
		}
		h, err := rdb.HGetAll(ctx, "orders").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 1 {
			t.Fatalf("hash = %v, want one field", h)
		}
		for k, v := range h {
			if len(k) <= len(field) || k[:len(field)] != field {
				t.Fatalf("field %q does not start with %q", k, field)
			}
			if v != fmt.Sprint(want) {
				t.Fatalf("hold count = %s, want %d", v, want)
			}
		}
		if n, _ := l.HoldCount(ctx); n != want {
			t.Fatalf("HoldCount = %d, want %d", n, want)
		}
		if d := rdb.PTTL(ctx, "orders").Val(); d <= 0 || d > 5*time.Second {
			t.Fatalf("PTTL = %v, want in (0, 5s]", d)
		}
	}
	if d, _ := l.RemainingLease(ctx); d <= 0 || d > 5*time.Second {
		t.Fatalf("RemainingLease = %v", d)
	}
	for left := 2; left >= 0; left-- {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if n, _ := l.HoldCount(ctx); n != left {
			t.Fatalf("HoldCount after Unlock = %d, want %d", n, left)
		}
	}
	if n := rdb.Exists(ctx, "orders").Val(); n != 0 {
		t.Fatal("key left behind after the last Unlock")
	}
	if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("extra Unlock = %v, want ErrNotHeld", err)
	}
	if locked, _ := l.IsLocked(ctx); locked {
		t.Fatal("IsLocked after full release")
	}
}

// section is one critical section as its owner saw it.
type section struct {
	owner      string
	start, end time.Time
}

// overlaps returns the pairs of sections that overlap in time.
func overlaps(log []section) []string {
	sort.Slice(log, func(i, j int) bool { return log[i].start.Before(log[j].start) })
	var bad []string
	for i := 1; i < len(log); i++ {
		if log[i].start.Before(log[i-1].end) {
			bad = append(bad, fmt.Sprintf("%s %v-%v overlaps %s %v-%v", log[i-1].owner,
				log[i-1].start.Format("15:04:05.000000"), log[i-1].end.Format(".000000"),
				log[i].owner, log[i].start.Format("15:04:05.000000"), log[i].end.Format(".000000")))
		}
	}
	return bad
}

// contend runs perClient goroutines on each of clients new Clients of srv;
// each gets its own handle from handle and runs rounds critical sections of
// 100-200 µs. It fails the test if two owners are ever inside at once, by a
// live counter and by the sections' time intervals.
func contend(t *testing.T, srv *redistest.Server, clients, perClient, rounds int, handle func(*lockactor.Client) lockactor.Locker) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	var (
		mu           sync.Mutex
		log          []section
		inside, peak atomic.Int32
		wg           sync.WaitGroup
	)
	for i := 0; i < clients; i++ {
		c := newClient(t, srv.Client(t))
		for j := 0; j < perClient; j++ {
			l := handle(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					if err := l.Lock(ctx); err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					start := time.Now()
					if n := inside.Add(1); n > peak.Load() {
						peak.Store(n)
					}
					time.Sleep(100 * time.Microsecond)
					inside.Add(-1)
					end := time.Now()
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
					mu.Lock()
					log = append(log, section{fmt.Sprint(i, "/", j), start, end})
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if got := len(log); got != clients*perClient*rounds {
		t.Fatalf("%d critical sections, want %d", got, clients*perClient*rounds)
	}
	if p := peak.Load(); p != 1 {
		t.Errorf("%d owners inside at once", p)
	}
	if bad := overlaps(log); len(bad) > 0 {
		t.Fatalf("%d overlapping critical sections, first: %s", len(bad), bad[0])
	}
}

func TestMutualExclusionAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	contend(t, srv, 3, 40, 5, func(c *lockactor.Client) lockactor.Locker { return c.Lock("shared") })
}

func TestWatchdogKeepsLockPastTimeout(t *testing.T) {
	srv := redistest.Start(t)
	const wd = 900 * time.Millisecond
	holder := newClient(t, srv.Client(t), lockactor.WithWatchdogTimeout(wd)).Lock("wd")
	other := newClient(t, srv.Client(t)).Lock("wd")
	ctx := ctxFor(t, 10*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tries := 0
	for time.Since(start) < 3*wd {
		ok, err := other.TryLock(ctx)
		if err != nil || ok {
			t.Fatalf("TryLock by another client after %v = %v, %v; want false", time.Since(start), ok, err)
		}
		tries++
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-holder.Lost():
		t.Fatal("Lost closed while the watchdog was renewing")
	default:
	}
	if n, _ := holder.HoldCount(ctx); n != 1 {
		t.Fatalf("holder's HoldCount after 3x the timeout = %d", n)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock after Unlock = %v, %v", ok, err)
	}
	t.Logf("%d refused tries over %v", tries, time.Since(start))
}

func TestWaiterWakesOnUnlockMessage(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv.Client(t)).Lock("wake")
	waiter := newClient(t, srv.Client(t)).Lock("wake")
	ctx := ctxFor(t, 20*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	woke := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error { return holder.Unlock(ctx) })
	if woke > 300*time.Millisecond {
		t.Fatalf("waiter woke %v after Unlock, want <= 300ms", woke)
	}
	t.Logf("waiter woke %v after Unlock", woke)
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseExpiryThenUnlockIsNotHeld(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	l := c.Lock("lease")
	if err := l.Lock(ctx, lockactor.WithLease(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.RemainingLease(ctx); d <= 0 || d > 200*time.Millisecond {
		t.Fatalf("RemainingLease = %v, want in (0, 200ms]", d)
	}
	other := c.Lock("lease")
	ok, err := other.TryLock(ctx, lockactor.WithWait(2*time.Second))
	if !ok || err != nil {
		t.Fatalf("TryLock after the lease = %v, %v", ok, err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock after the lease ran out = %v, want ErrNotHeld", err)
	}
	if n, _ := other.HoldCount(ctx); n != 1 {
		t.Fatal("the expired holder's Unlock touched the new holder's lock")
	}
}

func TestAbandonedLockIsTakenAfterTTL(t *testing.T) {
	srv := redistest.Start(t)
	const wd = 800 * time.Millisecond
	crashed, err := lockactor.New(srv.Client(t), lockactor.WithWatchdogTimeout(wd))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 10*time.Second)
	if err := crashed.Lock("abandoned").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(wd / 2) // at least one renewal
	_ = crashed.Close()
	closedAt := time.Now()

	taker := newClient(t, srv.Client(t)).Lock("abandoned")
	if ok, _ := taker.TryLock(ctx); ok {
		t.Fatal("lock free right after Close: Close must not release held locks")
	}
	if err := taker.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(closedAt)
	if took > wd+time.Second {
		t.Fatalf("abandoned lock taken %v after Close, want within the TTL (%v) + 1s", took, wd)
	}
	t.Logf("taken %v after Close", took)
}

func TestLostClosesWhenKeyDeleted(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const wd = 900 * time.Millisecond
	l := newClient(t, rdb, lockactor.WithWatchdogTimeout(wd)).Lock("stolen")
	ctx := ctxFor(t, 10*time.Second)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lost := l.Lost()
	rdb.Del(ctx, "stolen")
	select {
	case <-lost:
	case <-time.After(wd/3 + time.Second):
		t.Fatal("Lost did not close after the key was deleted")
	}
	if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock after loss = %v, want ErrNotHeld", err)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
		t.Fatal("a new acquisition must get a fresh Lost channel")
	default:
	}
}
