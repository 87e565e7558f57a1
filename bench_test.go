package lockactor_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/internal/tripcount"
	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

// infoField reads one integer field from an INFO reply.
func infoField(info, field string) int64 {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// commandStats reads INFO commandstats: per command, its fields (calls,
// usec, ...) as numbers.
func commandStats(tb testing.TB, rdb *redis.Client) map[string]map[string]float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	stats := map[string]map[string]float64{}
	for _, line := range strings.Split(info, "\r\n") {
		stat, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(stat, ":")
		fields := map[string]float64{}
		for _, kv := range strings.Split(rest, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				fields[k], _ = strconv.ParseFloat(v, 64)
			}
		}
		stats[name] = fields
	}
	return stats
}

// serverCalls sums calls over INFO commandstats: every command the server ran,
// including the ones inside scripts.
func serverCalls(tb testing.TB, rdb *redis.Client) int64 {
	var total float64
	for _, fields := range commandStats(tb, rdb) {
		total += fields["calls"]
	}
	return int64(total)
}

// rawPair is the floor: the acquire and release scripts sent straight from the
// caller's goroutine, no actor in between.
func rawPair(ctx context.Context, rdb *redis.Client, name, owner string) error {
	if err := scripts.Lock.Run(ctx, rdb, []string{name}, "30000", owner).Err(); err != redis.Nil {
		return err
	}
	keys := []string{name, redisio.LockChannel(name)}
	return scripts.Unlock.Run(ctx, rdb, keys, "0", "30000", owner, "publish").Err()
}

// BenchmarkUncontended compares lockactor's Lock+Unlock with the raw floor on
// the same connection pool; rounds alternate so both see the same machine.
// Reported: pairs/s for each and their ratio (target >= 0.8).
func BenchmarkUncontended(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	c := newClient(b, rdb)
	ctx := context.Background()
	l := c.Lock("uncontended")
	owner := uuid.NewString() + ":1"
	var rawTime, oursTime time.Duration
	var pairs int
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(500, b.N-done)
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := rawPair(ctx, rdb, "raw", owner); err != nil {
				b.Fatal(err)
			}
		}
		rawTime += time.Since(start)
		start = time.Now()
		for i := 0; i < n; i++ {
			if err := l.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		oursTime += time.Since(start)
		done += n
		pairs += n
	}
	b.StopTimer()
	raw := float64(pairs) / rawTime.Seconds()
	ours := float64(pairs) / oursTime.Seconds()
	b.ReportMetric(raw, "raw-pairs/s")
	b.ReportMetric(ours, "lockactor-pairs/s")
	b.ReportMetric(ours/raw, "ratio")
}

// BenchmarkContended runs 1,000 goroutines, each with its own handle, on one
// name of one Client. Reported: acquisitions/s, round trips the client sent
// per acquisition (target <= 4) and commands the server ran per acquisition
// (INFO commandstats, which also counts the commands inside scripts).
// Sub-benchmarks: relays on (the default) and off (every local hand-off
// a script).
func BenchmarkContended(b *testing.B) {
	for _, relay := range []bool{true, false} {
		name := map[bool]string{true: "relay", false: "norelay"}[relay]
		b.Run(name, func(b *testing.B) { benchmarkContended(b, lockactor.WithRelay(relay)) })
	}
}

func benchmarkContended(b *testing.B, opts ...lockactor.Option) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	hook := &tripcount.Hook{}
	counted := srv.Client(b)
	counted.AddHook(hook)
	c := newClient(b, counted, opts...)
	ctx := context.Background()
	const goroutines = 1000
	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < goroutines; i++ {
		l := c.Lock("contended")
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for remaining.Add(-1) >= 0 {
				if err := lockUnlock(ctx, l); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	calls0, sent0 := serverCalls(b, rdb), hook.RoundTrips()
	b.ResetTimer()
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	calls := serverCalls(b, rdb) - calls0 - 1 // minus the INFO of the first reading
	sent := hook.RoundTrips() - sent0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(sent)/float64(b.N), "roundtrips/acq")
	b.ReportMetric(float64(calls)/float64(b.N), "server-cmds/acq")
}

// BenchmarkRenewal holds 2,000 locks under the watchdog on one Client and
// reports the round trips the watchdog sends per 100 held locks per renewal
// period (renewals share a period boundary and go out pipelined).
func BenchmarkRenewal(b *testing.B) {
	srv := redistest.Start(b)
	hook := &tripcount.Hook{}
	rdb := srv.Client(b)
	rdb.AddHook(hook)
	const wd, held = 1500 * time.Millisecond, 2000
	c := newClient(b, rdb, lockactor.WithWatchdogTimeout(wd))
	ctx := context.Background()
	for i := 0; i < held; i++ {
		if err := c.Lock(fmt.Sprint("renew-", i)).Lock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// The metric is per renewal period, not per iteration: whatever b.N a
	// -benchtime asks for, measure three periods once or twice.
	b.ResetTimer()
	for i := 0; i < min(b.N, 2); i++ {
		before := hook.RoundTrips()
		time.Sleep(wd) // three renewal periods
		b.ReportMetric(float64(hook.RoundTrips()-before)/3/(held/100), "roundtrips/100locks/period")
	}
}

// BenchmarkAllocs reports heap allocations and bytes per Lock+Unlock pair
// over the whole client path (handle, actor, pipeline, go-redis): one
// goroutine on one name, and 64 goroutines over 100 names.
func BenchmarkAllocs(b *testing.B) {
	cases := []struct {
		name       string
		goroutines int
		names      int
	}{
		{"uncontended", 1, 1},
		{"manykeys", 64, 100},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			srv := redistest.Start(b)
			c := newClient(b, srv.Client(b))
			ctx := context.Background()
			var next atomic.Int64
			next.Store(int64(b.N))
			handles := make([][]*lockactor.Lock, tc.goroutines)
			for g := range handles {
				for n := range tc.names {
					handles[g] = append(handles[g], c.Lock(fmt.Sprintf("allocs-%d", n)))
				}
			}
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for g := range tc.goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; next.Add(-1) >= 0; i++ {
						if err := lockUnlock(ctx, handles[g][i%tc.names]); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// lockUnlock takes l and gives it back.
func lockUnlock(ctx context.Context, l *lockactor.Lock) error {
	if err := l.Lock(ctx); err != nil {
		return err
	}
	return l.Unlock(ctx)
}

// BenchmarkLatchServerCost reports what redis-server spends on one
// uncontended pair of scripts, raw (Redisson's two) and latched (as the
// runtime sends them), in µs of the server's own time (INFO commandstats:
// an EVALSHA's time includes the commands inside it). The two alternate in
// blocks of 500 pairs on one connection pool.
func BenchmarkLatchServerCost(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	ctx := context.Background()
	owner := uuid.NewString() + ":1"
	latch := redisio.LatchKey("latched", "bench", "lock")
	lockKeys := []string{"latched", latch}
	unlockKeys := []string{"latched", redisio.LockChannel("latched"), latch}
	var seq uint64
	latchedPair := func() error {
		seq++
		if err := scripts.Latched.Lock.Run(ctx, rdb, lockKeys, "30000", owner, seq, "60000").Err(); err != nil {
			return err
		}
		seq++
		return scripts.Latched.Unlock.Run(ctx, rdb, unlockKeys, "0", "30000", owner, "publish", seq, "60000").Err()
	}
	var rawUsec, latchedUsec float64
	var pairs int
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(500, b.N-done)
		for _, side := range []struct {
			pair func() error
			usec *float64
		}{
			{func() error { return rawPair(ctx, rdb, "raw", owner) }, &rawUsec},
			{latchedPair, &latchedUsec},
		} {
			before := evalshaUsec(b, rdb)
			for i := 0; i < n; i++ {
				if err := side.pair(); err != nil {
					b.Fatal(err)
				}
			}
			*side.usec += evalshaUsec(b, rdb) - before
		}
		done += n
		pairs += n
	}
	b.StopTimer()
	b.ReportMetric(rawUsec/float64(pairs), "raw-server-µs/pair")
	b.ReportMetric(latchedUsec/float64(pairs), "latched-server-µs/pair")
}

// evalshaUsec reads the server's total time in EVALSHA, in µs.
func evalshaUsec(tb testing.TB, rdb *redis.Client) float64 {
	return commandStats(tb, rdb)["evalsha"]["usec"]
}
