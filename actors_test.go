package lockactor_test

// The suite's entry point and what its tests share. The suite runs against
// real redis-server processes started by internal/redistest (miniredis only
// when redis-server is missing and LOCKACTOR_REQUIRE_REDIS is not 1): every
// call goes from a handle through its lock actor and redisio to Redis. The
// plain Lock's own tests are in lock_test.go.

import (
	"context"
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
	for env, child := range children {
		if addr := os.Getenv(env); addr != "" {
			os.Exit(child(addr)) // this binary, re-executed as a test's child process
		}
	}
	code := m.Run()
	redistest.StopShared() // the package's one Redis Cluster, if a test started it
	if code == 0 {
		err := goleak.Find(
			// go-redis keeps dialling a dead node in the background for about
			// a second after repeated failures, even after Close, asleep or dialling (measured
			// with go-redis v9.23).
			goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
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

// children are the child processes tests start by re-executing the test
// binary with an environment variable set to a Redis address: the variable
// and what the child runs (its exit code).
var children = map[string]func(addr string) int{
	permitChildEnv: permitChild, // a permit holder that is killed
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

// mostHeld is the most uses in the log that overlap at one instant, and
// that instant.
func mostHeld(log []section) (int, time.Time) {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, u := range log {
		if u.end.After(u.start) {
			edges = append(edges, edge{u.start, 1}, edge{u.end, -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].d < edges[j].d // an end before a start at the same instant
		}
		return edges[i].at.Before(edges[j].at)
	})
	most, now := 0, 0
	var at time.Time
	for _, e := range edges {
		if now += e.d; now > most {
			most, at = now, e.at
		}
	}
	return most, at
}

// lockAsync runs l.Lock(ctx) in a goroutine and reports when it returned.
func lockAsync(ctx context.Context, l lockactor.Locker) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx) }()
	return done
}

// waitErr waits up to d for done; it fails the test if nothing came.
func waitErr(t *testing.T, done <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
		return nil
	}
}
