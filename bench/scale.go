package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/tripcount"
)

// scaleSpec sizes the scale scenario.
type scaleSpec struct {
	Waiters  int           // goroutines waiting on one lock
	Names    int           // distinct names locked once each
	Held     int           // locks held at once under the watchdog
	Workers  int           // goroutines that lock the names and the held locks
	Idle     time.Duration // lockactor's WithIdleActorTimeout in the names test
	Watchdog time.Duration // WithWatchdogTimeout in the held test; a period is a third
	Periods  int           // renewal periods counted
	Quiet    time.Duration // no Redis traffic for this long: the waiters are parked
	PoolSize int
	Latency  time.Duration `json:"-"` // --latency
	Prefix   string

	HeapProfile string // written after the names test's settle period (lockactor)
}

// scaleLibs are the libraries the scale scenario measures.
var scaleLibs = []string{"raw", "lockactor"}

// memSnap is the heap, the goroutine stacks and the goroutine count after
// two collections.
type memSnap struct{ heap, stack, goroutines int64 }

func snapshot() memSnap {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnap{int64(ms.HeapAlloc), int64(ms.StackInuse), int64(runtime.NumGoroutine())}
}

// quiesce waits until hook has counted nothing for quiet, at most limit.
func quiesce(hook *tripcount.Hook, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last, since := hook.RoundTrips(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond)
		if n := hook.RoundTrips(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

// openScaleLib opens lockactor (with opts) or raw on a fresh counted client.
func openScaleLib(srv *server, sp scaleSpec, name string, opts ...lockactor.Option) (lib, *redis.Client, *tripcount.Hook, error) {
	rdb, hook := openClient(srv.addr, sp.PoolSize, sp.Latency)
	// Fill the connection pool first, so that its buffers are in every
	// "before" reading rather than counted against the library.
	parallel(sp.Workers, func() { _ = rdb.Ping(context.Background()).Err() })
	time.Sleep(100 * time.Millisecond) // let the previous run's goroutines end
	if name == "raw" {
		return newRaw(rdb), rdb, hook, nil
	}
	l, err := openLockactor(rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, nil, nil, err
	}
	return l, rdb, hook, nil
}

// scaleWaiters parks sp.Waiters goroutines on one held lock, measures the
// heap and stack they add, then releases the lock and times the drain (each
// waiter locks and unlocks once).
func scaleWaiters(srv *server, sp scaleSpec, name string) (map[string]float64, error) {
	l, rdb, hook, err := openScaleLib(srv, sp, name)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	defer l.Close()
	key := sp.Prefix + "waiters"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	holder := l.Locker(key)
	if err := holder.Lock(ctx); err != nil {
		return nil, err
	}
	m0 := snapshot()
	t0, rt0 := time.Now(), hook.RoundTrips()
	var wg sync.WaitGroup
	var granted, failed atomic.Int64
	for i := 0; i < sp.Waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk := l.Locker(key)
			if err := lk.Lock(ctx); err != nil {
				failed.Add(1)
				return
			}
			granted.Add(1)
			if err := lk.Unlock(context.Background()); err != nil {
				failed.Add(1)
			}
		}()
	}
	quiesce(hook, sp.Quiet, time.Minute)
	setup := time.Since(t0) - sp.Quiet
	rtSetup := hook.RoundTrips() - rt0
	m1 := snapshot()
	t1, rt1 := time.Now(), hook.RoundTrips()
	if err := holder.Unlock(ctx); err != nil {
		return nil, err
	}
	wg.Wait()
	drain := time.Since(t1)
	n := float64(sp.Waiters)
	return map[string]float64{
		"waiters":          n,
		"heap_per_waiter":  float64(m1.heap-m0.heap) / n,
		"stack_per_waiter": float64(m1.stack-m0.stack) / n,
		"setup_s":          setup.Seconds(),
		"setup_rt":         float64(rtSetup) / n,
		"drain_acq_s":      float64(granted.Load()) / drain.Seconds(),
		"drain_rt":         float64(hook.RoundTrips()-rt1) / max(float64(granted.Load()), 1),
		"granted":          float64(granted.Load()),
		"errors":           float64(failed.Load()),
	}, nil
}

// scaleNames locks and unlocks sp.Names distinct names once each, then
// compares goroutines and heap before, right after, and after the settle
// period: at least three idle timeouts, and on until the goroutine count is
// back to where it was (bounded).
func scaleNames(srv *server, sp scaleSpec, name string) (map[string]float64, error) {
	l, rdb, _, err := openScaleLib(srv, sp, name, lockactor.WithIdleActorTimeout(sp.Idle))
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m0 := snapshot()
	t0 := time.Now()
	var next, failed atomic.Int64
	parallel(sp.Workers, func() {
		for i := next.Add(1) - 1; i < int64(sp.Names); i = next.Add(1) - 1 {
			lk := l.Locker(fmt.Sprintf("%snames:%d", sp.Prefix, i))
			if lk.Lock(ctx) != nil || lk.Unlock(ctx) != nil {
				failed.Add(1)
			}
		}
	})
	elapsed := time.Since(t0)
	peak := snapshot()
	settle := settleGoroutines(m0.goroutines, 3*sp.Idle, max(15*time.Second, 6*sp.Idle))
	after := snapshot()
	if sp.HeapProfile != "" && name == "lockactor" {
		if err := writeHeapProfile(sp.HeapProfile); err != nil {
			return nil, err
		}
	}
	const mib = 1 << 20
	return map[string]float64{
		"names":         float64(sp.Names),
		"pairs_s":       float64(sp.Names) / elapsed.Seconds(),
		"gor_before":    float64(m0.goroutines),
		"gor_peak":      float64(peak.goroutines),
		"gor_after":     float64(after.goroutines),
		"heap_before":   float64(m0.heap) / mib,
		"heap_peak":     float64(peak.heap) / mib,
		"heap_after":    float64(after.heap) / mib,
		"heap_per_name": float64(after.heap-m0.heap) / float64(sp.Names),
		"settle_s":      settle.Seconds(),
		"errors":        float64(failed.Load()),
	}, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// settleGoroutines sleeps at least least, then until at most base goroutines
// run or limit has passed; it returns the time taken.
func settleGoroutines(base int64, least, limit time.Duration) time.Duration {
	t0 := time.Now()
	time.Sleep(least)
	for int64(runtime.NumGoroutine()) > base && time.Since(t0) < limit {
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(t0)
}

// parallel runs f on n goroutines and waits for them.
func parallel(n int, f func()) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}
