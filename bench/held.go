package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor"
)

// scaleHeld takes sp.Held distinct locks and keeps them for sp.Periods
// renewal periods (a period is a third of the watchdog timeout), counting the
// round trips the renewals cost. lockactor renews with its watchdog; raw
// does what Redisson's watchdog does: one renew.lua per held lock per period.
func scaleHeld(srv *server, sp scaleSpec, name string) (map[string]float64, error) {
	l, rdb, hook, err := openScaleLib(srv, sp, name, lockactor.WithWatchdogTimeout(sp.Watchdog))
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	period := sp.Watchdog / 3

	m0 := snapshot()
	lockers := make([]locker, sp.Held)
	for i := range lockers {
		lockers[i] = l.Locker(fmt.Sprintf("%sheld:%d", sp.Prefix, i))
	}
	var failed atomic.Int64
	forEach(sp.Workers, len(lockers), func(i int) {
		if lockers[i].Lock(ctx) != nil {
			failed.Add(1)
		}
	})
	var renewFailed atomic.Int64
	if raw, ok := l.(*rawLib); ok {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			rawWatchdog(ctx, raw, lockers, sp, stop, &renewFailed)
		}()
		defer func() { close(stop); <-done }()
	}
	m1 := snapshot()
	time.Sleep(period) // every hold has been renewed once
	rt0 := hook.RoundTrips()
	time.Sleep(time.Duration(sp.Periods) * period)
	rt := float64(hook.RoundTrips()-rt0) / float64(sp.Periods)
	keys, err := srv.admin.DBSize(ctx).Result()
	if err != nil {
		return nil, err
	}
	var lost int64
	for _, lk := range lockers {
		if a, ok := lk.(lockactorLocker); ok {
			select {
			case <-a.l.Lost():
				lost++
			default:
			}
		}
	}
	forEach(sp.Workers, len(lockers), func(i int) {
		if lockers[i].Unlock(ctx) != nil {
			failed.Add(1)
		}
	})
	return map[string]float64{
		"held":          float64(sp.Held),
		"rt_period":     rt,
		"rt_per_100":    rt / float64(sp.Held) * 100,
		"keys_alive":    float64(keys),
		"lost":          float64(lost + renewFailed.Load()),
		"heap_per_held": float64(m1.heap-m0.heap) / float64(sp.Held),
		"errors":        float64(failed.Load()),
	}, nil
}

// rawWatchdog renews every held raw lock once per period with sp.Workers
// goroutines until stop closes.
func rawWatchdog(ctx context.Context, raw *rawLib, lockers []locker, sp scaleSpec, stop <-chan struct{}, failed *atomic.Int64) {
	leaseMS := strconv.FormatInt(sp.Watchdog.Milliseconds(), 10)
	t := time.NewTicker(sp.Watchdog / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		forEach(sp.Workers, len(lockers), func(i int) {
			if ok, err := lockers[i].(*rawOwner).Renew(ctx, leaseMS); !ok || err != nil {
				failed.Add(1)
			}
		})
	}
}

// forEach calls f(i) for i in [0, n) on workers goroutines.
func forEach(workers, n int, f func(i int)) {
	var next atomic.Int64
	parallel(workers, func() {
		for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
			f(int(i))
		}
	})
}
