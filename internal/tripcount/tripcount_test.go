package tripcount

import (
	"context"
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHookCounts: commands on their own count one round trip and one
// command each, a pipeline one round trip and its length in commands; every
// call reaches the next hook and returns its error.
func TestHookCounts(t *testing.T) {
	ctx := context.Background()
	errNext := errors.New("from next")
	tests := []struct {
		name                           string
		sends                          []int // 0: a command on its own; n > 0: a pipeline of n
		commands, pipelines, pipelined int64
		roundTrips, sent               int64
	}{
		{"nothing", nil, 0, 0, 0, 0, 0},
		{"commands", []int{0, 0, 0}, 3, 0, 0, 3, 3},
		{"one pipeline", []int{5}, 0, 1, 5, 1, 5},
		{"mixed", []int{0, 3, 0, 1, 4}, 2, 3, 8, 5, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := new(Hook)
			var reached int
			one := h.ProcessHook(func(context.Context, redis.Cmder) error { reached++; return errNext })
			many := h.ProcessPipelineHook(func(context.Context, []redis.Cmder) error { reached++; return errNext })
			for _, n := range tt.sends {
				var err error
				if n == 0 {
					err = one(ctx, redis.NewStatusCmd(ctx, "ping"))
				} else {
					err = many(ctx, make([]redis.Cmder, n))
				}
				if err != errNext {
					t.Fatalf("the hook returned %v, want next's error", err)
				}
			}
			if reached != len(tt.sends) {
				t.Errorf("next was reached %d times, want %d", reached, len(tt.sends))
			}
			got := [5]int64{h.Commands.Load(), h.Pipelines.Load(), h.Pipelined.Load(), h.RoundTrips(), h.Sent()}
			want := [5]int64{tt.commands, tt.pipelines, tt.pipelined, tt.roundTrips, tt.sent}
			if got != want {
				t.Errorf("commands, pipelines, pipelined, round trips, sent = %v, want %v", got, want)
			}
		})
	}
}

// TestHookOnAClient: added to a go-redis client, the hook counts what the
// client's callers send. go-redis also passes a connection's set-up commands
// (HELLO, CLIENT SETINFO) through hooks, more than once on its first uses:
// the client's one connection is warmed up before the count.
func TestHookOnAClient(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 1})
	defer func() { _ = rdb.Close() }()
	h := new(Hook)
	rdb.AddHook(h)
	ctx := context.Background()
	send := func() {
		t.Helper()
		if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "k")
			p.Incr(ctx, "n")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	send()
	send()
	trips0, sent0 := h.RoundTrips(), h.Sent()
	send()
	if got, want := [2]int64{h.RoundTrips() - trips0, h.Sent() - sent0}, [2]int64{2, 3}; got != want {
		t.Errorf("round trips, sent = %v, want %v", got, want)
	}
}
