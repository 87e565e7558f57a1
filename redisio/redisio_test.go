package redisio

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockactor/lockactor/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testConn is a Conn on rdb without replica sync, for a test, closed when
// the test ends.
func testConn(t *testing.T, rdb redis.UniversalClient, shard Sharding) *Conn {
	t.Helper()
	c := NewConn(rdb, NewTopology(rdb, shard, quiet), SyncPolicy{})
	t.Cleanup(func() { c.Close(time.Now().Add(time.Second)) })
	return c
}

// A guarded call made after Close refuses to start: Close has already waited
// for the guarded goroutines, so one started now would outlive it.
func TestGuardAfterCloseStartsNothing(t *testing.T) {
	srv := redistest.Start(t)
	c := NewConn(srv.Client(t), NewTopology(srv.Client(t), ShardOff, quiet), SyncPolicy{})
	if !c.Close(time.Now().Add(time.Second)) {
		t.Fatal("Close with nothing running did not finish")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var ran atomic.Bool
	_, err := Guard(ctx, c, func(context.Context) (int, error) { ran.Store(true); return 0, nil })
	if !errors.Is(err, ErrClosed) || ran.Load() {
		t.Fatalf("Guard after Close = %v (ran: %v), want ErrClosed without running", err, ran.Load())
	}
}

// events collects one channel's events.
type events chan Event

func (e events) handler(ev Event) {
	select {
	case e <- ev:
	default:
	}
}

// await waits for an event of kind k (a payload, for messages) on e.
func (e events) await(t *testing.T, k EventKind, payload string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-e:
			if ev.Kind == k && (k != Message || ev.Payload == payload) {
				return
			}
		case <-deadline:
			t.Fatalf("no event %v %q within %v", k, payload, d)
		}
	}
}

// When a step of Requeue fails (a write on a broken connection), the channel
// is not left unsubscribed: the connection is replaced and every wanted
// channel subscribed again. (go-redis records a channel only after the
// write, and its reconnect after a failed write replays the record without
// it, so the subscription was lost for good.)
func TestFailedRequeueKeepsSubscription(t *testing.T) {
	for _, step := range []string{"unsubscribe", "subscribe"} {
		t.Run(step, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			p := NewPubSub(rdb, NewTopology(rdb, ShardOff, quiet), time.Second, quiet)
			defer p.Close(time.Now().Add(time.Second))
			ctx := context.Background()
			ev := make(events, 64)
			if _, err := p.Subscribe(ctx, "rq", ev.handler); err != nil {
				t.Fatal(err)
			}
			ev.await(t, Subscribed, "", 2*time.Second)
			var fired atomic.Bool
			p.mu.Lock()
			p.failCommand = func(on bool, channel string) error {
				if on == (step == "subscribe") && fired.CompareAndSwap(false, true) {
					return errors.New("injected write failure")
				}
				return nil
			}
			p.mu.Unlock()
			if err := p.Requeue(ctx, "rq"); err == nil {
				t.Fatal("Requeue reported no error")
			}
			ev.await(t, Subscribed, "", 2*time.Second)
			if err := rdb.Publish(ctx, "rq", "after").Err(); err != nil {
				t.Fatal(err)
			}
			ev.await(t, Message, "after", 2*time.Second)
		})
	}
}

// A PING that gets no PONG (a half-open connection) replaces the connection:
// its channels hear Disconnected, then Subscribed again, and messages flow.
func TestUnansweredPingReplacesConnection(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	p := NewPubSub(proxy.Client(t), NewTopology(nil, ShardOff, quiet), 200*time.Millisecond, quiet)
	defer p.Close(time.Now().Add(time.Second))
	ctx := context.Background()
	ev := make(events, 64)
	if _, err := p.Subscribe(ctx, "ho", ev.handler); err != nil {
		t.Fatal(err)
	}
	ev.await(t, Subscribed, "", 2*time.Second)
	if n := proxy.Freeze(func(ci redistest.ConnInfo) bool { return ci.Subscriber }); n != 1 {
		t.Fatalf("froze %d connections", n)
	}
	ev.await(t, Disconnected, "", 2*time.Second)
	ev.await(t, Subscribed, "", 2*time.Second)
	if err := srv.Client(t).Publish(ctx, "ho", "after").Err(); err != nil {
		t.Fatal(err)
	}
	ev.await(t, Message, "after", 2*time.Second)
}

// TestSlotOf: slots as Redis computes them (CLUSTER KEYSLOT).
func TestSlotOf(t *testing.T) {
	for _, tt := range []struct {
		key  string
		slot int
	}{
		{"123456789", 0x31C3}, // CRC16/XMODEM's check value
		{"foo", 12182},
		{"bar", 5061},
		{"{foo}.anything", 12182},
		{"x{foo}{bar}", 12182},
		{"{}foo", 9500}, // an empty hash tag: the whole key
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
		{"", 0},
	} {
		if got := SlotOf(tt.key); got != tt.slot {
			t.Errorf("SlotOf(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
}
