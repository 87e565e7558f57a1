//go:build full

package lockactor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

// Await callers across pub/sub reconnects and a stopped server: none
// returns before the count is really zero (each checks the key as it
// returns), and none stays blocked once it is.

// awaited is one Await's outcome: when it returned, its error, and
// whether the latch's key existed right after.
type awaited struct {
	at     time.Time
	err    error
	exists int64
}

// awaitEach starts perHandle Await calls on each handle; each reports on
// the channel returned (never through t: it may outlive a failed test).
func awaitEach(ctx context.Context, admin *redis.Client, handles []*lockactor.CountDownLatch, perHandle int) <-chan awaited {
	out := make(chan awaited, len(handles)*perHandle)
	for _, l := range handles {
		for range perHandle {
			go func() {
				err := l.Await(ctx)
				a := awaited{at: time.Now(), err: err}
				a.exists, _ = admin.Exists(ctx, l.Name()).Result()
				out <- a
			}()
		}
	}
	return out
}

// collectAwaits takes n outcomes from ch within d and checks that each Await
// returned nil with the count gone; it returns the latest return.
func collectAwaits(t *testing.T, ch <-chan awaited, n int, d time.Duration) time.Time {
	t.Helper()
	var last time.Time
	deadline := time.After(d)
	for i := range n {
		select {
		case a := <-ch:
			if a.err != nil {
				t.Fatalf("Await = %v", a.err)
			}
			if a.exists != 0 {
				t.Fatalf("an Await returned at %s while the count was still set", a.at.Format("15:04:05.000"))
			}
			if a.at.After(last) {
				last = a.at
			}
		case <-deadline:
			t.Fatalf("%d of %d Await calls still blocked after %v", n-i, n, d)
		}
	}
	return last
}

// numSub is the number of subscribers of channel.
func numSub(ctx context.Context, admin *redis.Client, channel string) int64 {
	return admin.PubSubNumSub(ctx, channel).Val()[channel]
}

// killSubscriber kills the pub/sub connections named name.
func killSubscriber(t *testing.T, admin *redis.Client, name string) int64 {
	t.Helper()
	ctx := context.Background()
	list, err := admin.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(" "+line+" ", " name="+name+" ") {
			id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
			k, _ := admin.Do(ctx, "CLIENT", "KILL", "ID", id).Int64()
			n += k
		}
	}
	return n
}

// The subscriptions are killed while callers wait; once they are back,
// another Client counts down to zero and every caller returns on the
// message.
func TestCountDownLatchAwaitAcrossPubSubKill(t *testing.T) {
	tests := []struct {
		name string
		kill func(t *testing.T, admin *redis.Client) int64
	}{
		{"CLIENT KILL TYPE pubsub", func(t *testing.T, admin *redis.Client) int64 {
			return admin.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Val()
		}},
		{"CLIENT KILL of one Client's subscriber", func(t *testing.T, admin *redis.Client) int64 {
			return killSubscriber(t, admin, "cdl-kill-0")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			if srv.Embedded() {
				t.Skip("needs a real redis-server (CLIENT KILL)")
			}
			admin := srv.Client(t)
			ctx := ctxFor(t, 30*time.Second)
			const name = "cdl-kill"
			channel := redisio.CountDownChannel(name)
			var handles []*lockactor.CountDownLatch
			for i := range 2 {
				rdb := srv.ClientWith(t, func(o *redis.Options) { o.ClientName = "cdl-kill-" + string(rune('0'+i)) })
				handles = append(handles, newClient(t, rdb).CountDownLatch(name))
			}
			down := newClient(t, srv.Client(t)).CountDownLatch(name)
			if ok, err := down.TrySetCount(ctx, 1); !ok || err != nil {
				t.Fatal(ok, err)
			}
			const per = 4
			results := awaitEach(ctx, admin, handles, per)
			within(t, 5*time.Second, "both Clients subscribed", func() bool { return numSub(ctx, admin, channel) == 2 })
			// (How many subscribers are left right after the kill is not
			// judged: a command written on a killed connection, a barrier's
			// PING, makes go-redis subscribe again at once.)
			if n := tc.kill(t, admin); n == 0 {
				t.Fatal("killed no connection")
			}
			within(t, 3*time.Second, "both Clients subscribed again", func() bool { return numSub(ctx, admin, channel) == 2 })
			if len(results) != 0 {
				t.Fatal("an Await returned across the kill, before any CountDown")
			}
			opened := time.Now()
			if err := down.CountDown(ctx); err != nil {
				t.Fatal(err)
			}
			last := collectAwaits(t, results, 2*per, 2*time.Second)
			// The re-check runs once a second: sooner is the message.
			if d := last.Sub(opened); d > 800*time.Millisecond {
				t.Fatalf("the last Await returned %v after the count reached 0: the resubscribed channel did not deliver", d)
			}
		})
	}
}

// The count reaches zero while the awaiters' subscription is down (their
// connection black-holed, so the zero message is lost with it). When the
// connection is replaced, the re-read releases them, sooner than the
// periodic re-check would.
func TestCountDownLatchZeroWhileUnsubscribed(t *testing.T) {
	srv := redistest.Start(t)
	if srv.Embedded() {
		t.Skip("needs a real redis-server behind a proxy")
	}
	admin := srv.Client(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "cdl-down"
	proxy := redistest.NewProxy(t, srv.Addr())
	rdb := proxy.Client(t)
	reads := &readHook{key: name, done: make(chan time.Time, 64)}
	rdb.AddHook(reads)
	waiting := newClient(t, rdb).CountDownLatch(name)
	down := newClient(t, srv.Client(t)).CountDownLatch(name)
	if ok, err := down.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	const n = 4
	results := awaitEach(ctx, admin, []*lockactor.CountDownLatch{waiting}, n)
	within(t, 5*time.Second, "subscribed", func() bool { return numSub(ctx, admin, redisio.CountDownChannel(name)) == 1 })
	if k := proxy.Freeze(func(c redistest.ConnInfo) bool { return c.Subscriber }); k != 1 {
		t.Fatalf("froze %d subscriber connections, want 1", k)
	}
	// The next periodic read of the count, after the freeze: the one after
	// it comes a second after it was sent, unless an event asks sooner.
	var sent time.Time
	for drained := false; !drained; {
		select {
		case <-reads.done:
		default:
			drained = true
		}
	}
	select {
	case sent = <-reads.done:
	case <-time.After(3 * time.Second):
		t.Fatal("no re-check of the count within 3s")
	}
	if err := down.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if admin.Exists(ctx, name).Val() != 0 {
		t.Fatal("the count is still set after the last CountDown")
	}
	if len(results) != 0 {
		t.Fatal("an Await returned before its subscription came back: the zero message should be lost")
	}
	if k := proxy.Cut(func(c redistest.ConnInfo) bool { return c.Subscriber }); k != 1 {
		t.Fatalf("cut %d subscriber connections, want 1", k)
	}
	last := collectAwaits(t, results, n, 2*time.Second)
	t.Logf("the last Await returned %v after the previous re-check was sent", last.Sub(sent))
	if d := last.Sub(sent); d > 900*time.Millisecond {
		t.Fatalf("the last Await returned %v after the previous re-check was sent: the periodic re-check, not the re-read on reconnect, released it", d)
	}
}

// readHook reports when each GET of key was answered.
type readHook struct {
	key  string
	done chan time.Time
}

func (h *readHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *readHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		sent := time.Now()
		err := next(ctx, cmd)
		if a := cmd.Args(); len(a) == 2 && strings.EqualFold(a[0].(string), "get") && a[1] == h.key {
			select {
			case h.done <- sent:
			default:
			}
		}
		return err
	}
}

func (h *readHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The server is stopped while callers wait and a CountDown with a
// deadline is in flight: the CountDown returns by its deadline, no caller
// returns while the server is stopped or the count is still set, and all
// return once it reaches zero (the late CountDown's, or the next one).
func TestCountDownLatchAwaitAcrossSIGSTOP(t *testing.T) {
	for _, count := range []int64{1, 2} {
		t.Run("count "+string(rune('0'+count)), func(t *testing.T) {
			srv := redistest.Start(t)
			if srv.Embedded() {
				t.Skip("needs a real redis-server (SIGSTOP)")
			}
			admin := srv.Client(t)
			ctx := ctxFor(t, 60*time.Second)
			const name = "cdl-stop"
			handles := []*lockactor.CountDownLatch{
				newClient(t, srv.Client(t)).CountDownLatch(name),
				newClient(t, srv.Client(t)).CountDownLatch(name),
			}
			down := newClient(t, srv.Client(t)).CountDownLatch(name)
			if ok, err := down.TrySetCount(ctx, count); !ok || err != nil {
				t.Fatal(ok, err)
			}
			const per = 3
			results := awaitEach(ctx, admin, handles, per)
			within(t, 5*time.Second, "both Clients subscribed", func() bool {
				return numSub(ctx, admin, redisio.CountDownChannel(name)) == 2
			})
			srv.Pause(t)
			var once sync.Once
			resume := func() { once.Do(func() { srv.Resume(t) }) }
			defer resume()
			dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			start := time.Now()
			err := down.CountDown(dctx)
			cancel()
			if d := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || d > 1300*time.Millisecond {
				t.Fatalf("CountDown on a stopped server = %v after %v, want DeadlineExceeded by its 300ms deadline", err, d)
			}
			time.Sleep(500 * time.Millisecond) // the outage goes on
			if len(results) != 0 {
				t.Fatal("an Await returned while the server was stopped")
			}
			resumed := time.Now() // SIGCONT follows: nothing can be zero before
			resume()
			// Count down what is left, one at a time through the same
			// actor, which runs the timed-out CountDown's settlement first.
			for {
				v, err := admin.Get(ctx, name).Int64()
				if errors.Is(err, redis.Nil) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(results) != 0 {
					t.Fatalf("an Await returned with the count at %d", v)
				}
				if err := down.CountDown(ctx); err != nil {
					t.Fatal(err)
				}
			}
			last := collectAwaits(t, results, 2*per, 2*time.Second)
			if last.Before(resumed) {
				t.Fatal("an Await returned before the server resumed")
			}
			t.Logf("count %d: every Await returned within %v of the resume", count, last.Sub(resumed))
		})
	}
}
