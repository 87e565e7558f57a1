package lockactor_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/delayline"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
)

func TestCountDownLatchTrySetCount(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	l := c.CountDownLatch("cdl-set")
	for _, tt := range []struct {
		n     int64
		want  bool
		count int64
	}{
		{3, true, 3},  // unset: set
		{5, false, 3}, // set: unchanged
		{1, false, 3},
	} {
		ok, err := l.TrySetCount(ctx, tt.n)
		if err != nil || ok != tt.want {
			t.Fatalf("TrySetCount(%d) = %v, %v; want %v", tt.n, ok, err, tt.want)
		}
		if n, err := l.Count(ctx); err != nil || n != tt.count {
			t.Fatalf("Count after TrySetCount(%d) = %d, %v; want %d", tt.n, n, err, tt.count)
		}
	}
}

func TestCountDownLatchInvalid(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	for _, tt := range []struct {
		what string
		call func() error
	}{
		{"count 0", func() error { _, err := c.CountDownLatch("x").TrySetCount(ctx, 0); return err }},
		{"count -1", func() error { _, err := c.CountDownLatch("x").TrySetCount(ctx, -1); return err }},
		{"empty name set", func() error { _, err := c.CountDownLatch("").TrySetCount(ctx, 1); return err }},
		{"empty name down", func() error { return c.CountDownLatch("").CountDown(ctx) }},
		{"empty name count", func() error { _, err := c.CountDownLatch("").Count(ctx); return err }},
		{"empty name await", func() error { return c.CountDownLatch("").Await(ctx) }},
	} {
		if err := tt.call(); !errors.Is(err, lockactor.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tt.what, err)
		}
	}
}

// CountDown reaches 0, deletes the key, and stays at 0; the latch can then
// be set again.
func TestCountDownLatchCountsDownToZero(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	l := c.CountDownLatch("cdl-down")
	if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for i, want := range []int64{1, 0, 0, 0} {
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Count(ctx); err != nil || n != want {
			t.Fatalf("Count after %d CountDowns = %d, %v; want %d", i+1, n, err, want)
		}
	}
	if n := rdb.Exists(ctx, "cdl-down").Val(); n != 0 {
		t.Fatal("the key outlived its count reaching 0")
	}
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount after the latch opened = %v, %v; want true", ok, err)
	}
}

// Await returns at once when no count is set.
func TestCountDownLatchAwaitUnset(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	start := time.Now()
	if err := c.CountDownLatch("cdl-unset").Await(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Await on an unset latch took %v", d)
	}
}

// Waiters on two Clients are all released when another Client counts the
// latch down to 0.
func TestCountDownLatchReleasesAllWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	c1, c2, c3 := newClient(t, srv.Client(t)), newClient(t, srv.Client(t)), newClient(t, srv.Client(t))
	if ok, err := c3.CountDownLatch("cdl-all").TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	const perClient = 8
	var wg sync.WaitGroup
	done := make(chan error, 2*perClient)
	for _, c := range []*lockactor.Client{c1, c2} {
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				done <- c.CountDownLatch("cdl-all").Await(ctx)
			}()
		}
	}
	time.Sleep(300 * time.Millisecond)
	down := c3.CountDownLatch("cdl-all")
	if err := down.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if len(done) != 0 {
		t.Fatalf("a waiter returned before the count reached 0: %v", <-done)
	}
	opened := time.Now()
	if err := down.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if d := time.Since(opened); d > 500*time.Millisecond {
		t.Fatalf("waiters released %v after the count reached 0 (want the zero message, not the re-check)", d)
	}
	close(done)
	for err := range done {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestCountDownLatchAwaitCancel(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	l := c.CountDownLatch("cdl-cancel")
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := l.Await(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await past its deadline = %v, want DeadlineExceeded", err)
	}
	// A cancelled waiter leaves no trace: the next one is released.
	d := wakeAfter(t, func() error { return l.Await(ctx) }, func() error { return l.CountDown(ctx) })
	if d > 500*time.Millisecond {
		t.Fatalf("released %v after the count reached 0", d)
	}
}

func TestCountDownLatchClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c, err := lockactor.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 10*time.Second)
	l := c.CountDownLatch("cdl-close")
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- l.Await(ctx) }()
	time.Sleep(200 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, lockactor.ErrClosed) {
			t.Fatalf("Await across Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Await outlived Close")
	}
	for what, err := range map[string]error{
		"Await":     l.Await(ctx),
		"CountDown": l.CountDown(ctx),
	} {
		if !errors.Is(err, lockactor.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", what, err)
		}
	}
}

// A CountDown whose reply is lost after the script ran, and one that
// go-redis sends again on a new connection, each count down once.
func TestCountDownLatchRetriedCountDownAppliesOnce(t *testing.T) {
	srv := redistest.Start(t)
	srv.NeedsReal(t, "INFO commandstats, to count the scripts the server ran")
	ctx := ctxFor(t, 20*time.Second)
	script := scripts.Latched.CountDownDown

	t.Run("lost reply", func(t *testing.T) {
		rdb, hook := hooked(t, srv)
		l := newClient(t, rdb).CountDownLatch("cdl-lost")
		if ok, err := l.TrySetCount(ctx, 3); !ok || err != nil {
			t.Fatal(ok, err)
		}
		r := hook.once(t, rdb, script, faultRule{lose: true})
		_ = l.CountDown(ctx) // nil once settled, or the lost reply's error
		if hook.count(r) != 1 {
			t.Fatalf("the fault hit %d CountDowns, want 1", hook.count(r))
		}
		within(t, 5*time.Second, "the lost CountDown settled", func() bool {
			n, _ := l.Count(ctx)
			return n != 3
		})
		if n, err := l.Count(ctx); err != nil || n != 2 {
			t.Fatalf("Count after one CountDown with a lost reply = %d, %v; want 2", n, err)
		}
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := l.Count(ctx); n != 1 {
			t.Fatalf("Count after the next CountDown = %d, want 1", n)
		}
	})

	t.Run("re-sent", func(t *testing.T) {
		proxy := redistest.NewProxy(t, srv.Addr())
		l := newClient(t, proxy.Client(t)).CountDownLatch("cdl-resent")
		if ok, err := l.TrySetCount(ctx, 3); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if err := script.Load(ctx, srv.Client(t)).Err(); err != nil {
			t.Fatal(err)
		}
		admin := srv.Client(t)
		evalshas := func() int64 { return evalshaCalls(t, admin) }
		before := evalshas()
		cut := proxy.CutAfter(func(args []string) bool {
			return len(args) > 1 && args[0] == "EVALSHA" && args[1] == script.Hash()
		})
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		<-cut
		if n := evalshas() - before; n < 2 {
			t.Fatalf("the server ran %d script(s); the cut should have made go-redis send it again", n)
		}
		if n, err := l.Count(ctx); err != nil || n != 2 {
			t.Fatalf("Count after one re-sent CountDown = %d, %v; want 2", n, err)
		}
	})
}

// A zero message still on its way when the count is set again must not let
// go an Await that began after, and must still release the Await it was
// for: here Client A's subscription connection delivers 80ms late, so round
// one's zero message reaches A after round two was set and awaited. Before,
// it released every Await waiting in A, the new one included, while the
// count was 1 and nobody counted down (and when it arrived together with
// round two's new-count message, it released nobody).
func TestCountDownLatchOldZeroMessageOpensNoNewAwait(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	slowSub := srv.ClientWith(t, func(o *redis.Options) {
		o.Dialer = delayline.Dialer(func(conn net.Conn) net.Conn {
			return delayline.OnSubscribe(conn, func() time.Duration { return 80 * time.Millisecond })
		})
	})
	a, b := newClient(t, slowSub).CountDownLatch("cdl-rounds"), newClient(t, srv.Client(t)).CountDownLatch("cdl-rounds")
	ctx := ctxFor(t, 10*time.Second)
	if ok, err := b.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	first := make(chan error, 1)
	go func() { first <- a.Await(ctx) }()
	time.Sleep(300 * time.Millisecond) // A subscribed and waiting
	if err := b.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	// Round two's new-count message apart from round one's zero message:
	// A hears them one at a time.
	time.Sleep(20 * time.Millisecond)
	if ok, err := b.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount of round two = %v, %v", ok, err)
	}
	actx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	if err := a.Await(actx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await of round two, with its count set and nobody counting down = %v, want its ctx's error", err)
	}
	if err := waitErr(t, first, 5*time.Second, "round one's Await"); err != nil {
		t.Fatalf("round one's Await = %v", err)
	}
}
