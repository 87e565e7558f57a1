package redisio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/internal/tripcount"
	"github.com/lockactor/lockactor/scripts"
)

// TestConcurrentScriptsShareRoundTrips: scripts that many actors send at
// about the same time go out as pipelines, each caller gets its own reply,
// and a caller that sent a pipeline is not kept sending everyone else's.
func TestConcurrentScriptsShareRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	count := &tripcount.Hook{}
	rdb.AddHook(count)
	c := testConn(t, rdb, ShardOff)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const callers, each = 64, 50
	var wg sync.WaitGroup
	var wrong atomic.Int64
	var slowest atomic.Int64
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprint("owner-", g)
			for i := range each {
				name := fmt.Sprint("batched-", g, "-", i)
				start := time.Now()
				r := c.Lock(ctx, Op{Latch: LatchKey(name, "c", "lock"), Seq: uint64(g*each + i + 1), Keep: time.Second}, name, owner, time.Minute)
				if d := time.Since(start); int64(d) > slowest.Load() {
					slowest.Store(int64(d))
				}
				if ok, _, err := r.Acquire(); !ok || err != nil {
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d of %d calls were not granted their own fresh lock", n, callers*each)
	}
	trips := count.RoundTrips()
	t.Logf("%d calls in %d round trips (%d pipelines); slowest call %v", callers*each, trips, count.Pipelines.Load(), time.Duration(slowest.Load()))
	if trips >= callers*each {
		t.Fatalf("%d round trips for %d concurrent calls: nothing was pipelined", trips, callers*each)
	}
}

// TestPostsAfterCloseAreDropped: latch deletions posted after Close are
// dropped and start nothing that Close would have to wait for.
func TestPostsAfterCloseAreDropped(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := NewConn(rdb, NewTopology(rdb, ShardOff, quiet), SyncPolicy{})
	latch := LatchKey("posted", "c", "lock")
	if err := rdb.Set(context.Background(), latch, "1:i1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if !c.Close(time.Now().Add(time.Second)) {
		t.Fatal("Close with nothing running did not finish")
	}
	c.ForgetLatch(latch, 1)
	time.Sleep(100 * time.Millisecond)
	if n := rdb.Exists(context.Background(), latch).Val(); n != 1 {
		t.Fatal("a deletion posted after Close was sent")
	}
}

// TestNoScriptKeepsOrderOnOneSlot: after the server lost its script cache
// (SCRIPT FLUSH, a restart, a failover) other clients load back only the
// scripts they use, so one call of a pipeline can get NOSCRIPT while a
// later one on the same slot runs. The call that got NOSCRIPT was sent
// again after the rest of the pipeline had run: a fair_cancel could land
// after a newer fair_lock of the same owner. Calls on one slot must run in
// the order they were queued.
func TestNoScriptKeepsOrderOnOneSlot(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := testConn(t, rdb, ShardOff)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := redis.NewScript(`return redis.call('rpush', KEYS[1], 'first')`)
	second := redis.NewScript(`return redis.call('rpush', KEYS[1], 'second')`)
	alone := redis.NewScript(`return redis.call('rpush', KEYS[1], 'alone')`) // the only one on its slot
	const key = "{order}:log"
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := second.Load(ctx, rdb).Err(); err != nil { // as another client's use would
		t.Fatal(err)
	}
	var replies []Reply
	record := func(r Reply) { replies = append(replies, r) }
	c.batch.send([]*batchCall{
		newCall(ctx, first, []string{key}, nil, record),
		newCall(ctx, second, []string{"{order}:other"}, nil, record),
		newCall(ctx, alone, []string{"{alone}"}, nil, record),
		newCall(ctx, second, []string{key}, nil, record),
	}, 0)
	if len(replies) != 4 {
		t.Fatalf("%d replies for 4 calls", len(replies))
	}
	for i, r := range replies {
		if r.Err != nil {
			t.Fatalf("call %d: %v", i, r.Err)
		}
	}
	if got := rdb.LRange(ctx, key, 0, -1).Val(); len(got) != 2 || got[0] != "first" || got[1] != "second" {
		t.Fatalf("ran in the order %v, want [first second]", got)
	}
	if got := rdb.LRange(ctx, "{alone}", 0, -1).Val(); len(got) != 1 {
		t.Fatalf("the call answered NOSCRIPT ran %d times, want once", len(got))
	}
}

// gateHook holds the first command or pipeline it sees until open is
// closed, so that calls queue behind it, and records the keys the Renew
// script was sent for.
type gateHook struct {
	once    sync.Once
	held    chan struct{} // closed when the first command is being held
	open    chan struct{}
	mu      sync.Mutex
	renewed []string
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.see(cmds)
		return next(ctx, cmds)
	}
}

func (h *gateHook) see(cmds []redis.Cmder) {
	for _, cmd := range cmds {
		if a := cmd.Args(); len(a) > 3 && fmt.Sprint(a[1]) == scripts.Renew.Hash() {
			h.mu.Lock()
			h.renewed = append(h.renewed, fmt.Sprint(a[3]))
			h.mu.Unlock()
		}
	}
	h.once.Do(func() {
		close(h.held)
		<-h.open
	})
}

// TestStaleRenewalIsNotSent: a renewal that waited for its pipeline
// behind a slow one (a late reply holds the flusher) while its hold was
// released is not sent: a hold is never renewed after its Unlock, even
// when the release itself is still queued. A renewal still wanted goes.
func TestStaleRenewalIsNotSent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale bool
		want  bool // the renewal's reply
		sent  bool // the script reached the server (and raised the TTL)
	}{
		{name: "released meanwhile", stale: true, want: false, sent: false},
		{name: "still held", stale: false, want: true, sent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			ctx := context.Background()
			key := "stale-renewal"
			if err := rdb.HSet(ctx, key, "owner", 1).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.PExpire(ctx, key, 10*time.Second)
			gate := &gateHook{held: make(chan struct{}), open: make(chan struct{})}
			rdb.AddHook(gate)
			c := testConn(t, rdb, ShardOff)

			// A first renewal of another key holds the flusher.
			c.Renew(ctx, "other", "owner", time.Minute, nil, func(bool, error) {})
			<-gate.held
			var released atomic.Bool
			type result struct {
				ok  bool
				err error
			}
			got := make(chan result, 1)
			c.Renew(ctx, key, "owner", time.Minute, released.Load, func(ok bool, err error) { got <- result{ok, err} })
			released.Store(tc.stale)
			close(gate.open)

			var r result
			select {
			case r = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the renewal was never answered")
			}
			if r.ok != tc.want || (r.err != nil) != tc.stale || (tc.stale && !errors.Is(r.err, ErrStale)) {
				t.Fatalf("renewal answered (%v, %v), want ok=%v and an ErrStale error=%v", r.ok, r.err, tc.want, tc.stale)
			}
			gate.mu.Lock()
			sent := slices.Contains(gate.renewed, key)
			gate.mu.Unlock()
			if sent != tc.sent {
				t.Fatalf("renewal script sent for %q: %v, want %v", key, sent, tc.sent)
			}
			if ttl := rdb.PTTL(ctx, key).Val(); (ttl > 10*time.Second) != tc.sent {
				t.Fatalf("key's TTL is %v after the renewal; want it raised to the minute: %v", ttl, tc.sent)
			}
		})
	}
}
