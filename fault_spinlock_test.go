//go:build full

package lockactor_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/scripts"
)

// TestSpinLockFaults spins while replies to its acquire script are lost and
// while its Client's connections are killed, beside Lock workers of another
// Client: every worker finishes, never two inside at once, and the lock is
// free at the end.
func TestSpinLockFaults(t *testing.T) {
	srv := redistest.Start(t)
	srv.NeedsReal(t, "CLIENT KILL, to cut the Client's connections")
	admin := srv.Client(t)
	const connName = "spin-faults"
	rdb := srv.ClientWith(t, func(o *redis.Options) { o.ClientName = connName })
	hook := &faultHook{}
	rdb.AddHook(hook)
	// One worker per spinning Client: none is handed the lock by a local
	// release, so each of their acquisitions spins in Redis.
	var spinners []*lockactor.Client
	for range 3 {
		spinners = append(spinners, newClient(t, rdb, lockactor.WithSpinBackoff(time.Millisecond, 20*time.Millisecond)))
	}
	lockers := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 60*time.Second)
	if err := scripts.Latched.Lock.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	lost := hook.add(&faultRule{match: evalOf(scripts.Latched.Lock.Hash()), times: 8, lose: true})

	var inside, most, done, errs atomic.Int64
	var wg sync.WaitGroup
	work := func(l *lockactor.Lock, rounds int) {
		for i := 0; i < rounds; {
			if err := l.Lock(ctx); err != nil {
				if ctx.Err() != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				errs.Add(1) // a kill may fail a call; the worker asks again
				continue
			}
			i++
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			inside.Add(-1)
			done.Add(1)
			// An Unlock whose reply is cut by a kill may report an error
			// while the release goes on in the background; the next Lock
			// waits for it.
			_ = l.Unlock(ctx)
		}
	}
	const rounds = 15
	for _, c := range spinners {
		wg.Go(func() { work(c.SpinLock("faulty"), rounds) })
		wg.Go(func() { work(lockers.Lock("faulty"), rounds) })
	}
	killer := make(chan struct{})
	var kills atomic.Int64
	go func() { // kills the spinners' connections, and only theirs, a few times
		defer close(killer)
		for range 5 {
			time.Sleep(40 * time.Millisecond)
			list, err := admin.ClientList(ctx).Result()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
				if !strings.Contains(" "+line+" ", " name="+connName+" ") {
					continue
				}
				id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
				if n, err := admin.Do(ctx, "CLIENT", "KILL", "ID", id).Int64(); err == nil {
					kills.Add(n)
				}
			}
		}
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(45 * time.Second):
		t.Fatalf("workers hung: %d of %d critical sections done", done.Load(), 6*rounds)
	}
	<-killer
	t.Logf("lost replies: %d matched, connections killed: %d, calls failed: %d", hook.count(lost), kills.Load(), errs.Load())
	if m := most.Load(); m != 1 {
		t.Fatalf("%d holders at once", m)
	}
	if hook.count(lost) == 0 || kills.Load() == 0 {
		t.Fatalf("faults not injected: %d acquire scripts faulted, %d connections killed", hook.count(lost), kills.Load())
	}
	if d := done.Load(); d != 6*rounds {
		t.Fatalf("%d critical sections, want %d", d, 6*rounds)
	}
	within(t, 5*time.Second, "lock key gone", func() bool { return admin.Exists(ctx, "faulty").Val() == 0 })
}
