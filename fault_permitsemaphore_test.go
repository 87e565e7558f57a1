//go:build full

package lockactor_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

// TestPermitSemaphoreFaults runs holders on two Clients that Acquire with a
// lease, use the permit briefly and Release it, while replies are lost,
// the Clients' connections are killed, or the server is stopped for less
// or more than a lease. Throughout:
//   - the holders' uses of a permit never overlap more than the count: a
//     use runs from Acquire's return to Release's call, or to the end of
//     the lease if sooner (Redis may give the permit to another then);
//   - Redis's count plus the held permits in {name}:timeout is always the
//     set count (read in one MULTI);
//   - no Acquire or Release returns later than its ctx allows;
//   - every id granted is new, and holders make progress after the fault;
//
// and at the end, with every permit released or expired, the count is back
// to the set count.
func TestPermitSemaphoreFaults(t *testing.T) {
	const connName = "permit-faults"
	tests := []struct {
		name  string
		lease time.Duration
		// settle bounds how long after the holders stop the count is back:
		// below the lease where no lease may run out, so that only the
		// releases can bring it back.
		settle time.Duration
		hook   bool                                       // faultHook on the holders' clients
		inject func(t *testing.T, f *permitFaultEnv) bool // false: the fault did not take
	}{
		{"lost replies", 30 * time.Second, 3 * time.Second, true, func(t *testing.T, f *permitFaultEnv) bool {
			acq := f.hook.add(&faultRule{match: evalOf(scripts.Latched.PermitAcquire.Hash()), times: 6, lose: true})
			rel := f.hook.add(&faultRule{match: evalOf(scripts.Latched.PermitRelease.Hash()), times: 6, lose: true})
			f.progress(t, 8)
			t.Logf("lost replies: %d acquires, %d releases matched", f.hook.count(acq), f.hook.count(rel))
			return f.hook.count(acq) > 0 && f.hook.count(rel) > 0
		}},
		{"CLIENT KILL of the holders' connections", 30 * time.Second, 3 * time.Second, false, func(t *testing.T, f *permitFaultEnv) bool {
			var kills int64
			for range 6 {
				kills += killNamed(t, f.admin, connName)
				f.progress(t, 2)
			}
			t.Logf("connections killed: %d", kills)
			return kills > 0
		}},
		{"SIGSTOP shorter than a lease", 10 * time.Second, 3 * time.Second, false, func(t *testing.T, f *permitFaultEnv) bool {
			f.srv.Pause(t)
			time.Sleep(700 * time.Millisecond) // the outage
			f.srv.Resume(t)
			return true
		}},
		{"SIGSTOP longer than a lease", 300 * time.Millisecond, 5 * time.Second, false, func(t *testing.T, f *permitFaultEnv) bool {
			f.srv.Pause(t)
			time.Sleep(1200 * time.Millisecond) // the outage, 4 leases
			f.srv.Resume(t)
			return true
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			if srv.Embedded() {
				t.Skip("needs a real redis-server (CLIENT KILL, SIGSTOP)")
			}
			const name, set = "pfaults", 2
			f := &permitFaultEnv{srv: srv, admin: srv.Client(t), hook: &faultHook{}}
			ctx := ctxFor(t, 90*time.Second)
			var handles []*lockactor.PermitSemaphore
			for range 2 {
				rdb := srv.ClientWith(t, func(o *redis.Options) { o.ClientName = connName })
				if tc.hook {
					rdb.AddHook(f.hook)
				}
				for _, s := range []*redis.Script{scripts.Latched.PermitAcquire, scripts.Latched.PermitRelease} {
					if err := s.Load(ctx, rdb).Err(); err != nil {
						t.Fatal(err)
					}
				}
				handles = append(handles, newClient(t, rdb).PermitSemaphore(name))
			}
			if ok, err := handles[0].TrySetPermits(ctx, set); !ok || err != nil {
				t.Fatalf("TrySetPermits = %v, %v", ok, err)
			}
			sampled := f.sample(t, name, set)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for _, s := range handles {
				for range 3 {
					wg.Go(func() { f.holder(t, s, tc.lease, stop) })
				}
			}
			f.progress(t, 6)
			if !tc.inject(t, f) {
				t.Error("the fault was not injected")
			}
			f.progress(t, 6) // holders go on after the fault
			close(stop)
			finished := make(chan struct{})
			go func() { wg.Wait(); close(finished) }()
			select {
			case <-finished:
			case <-time.After(30 * time.Second):
				t.Fatalf("holders hung: %d uses", f.uses.Load())
			}
			switch n, bad := sampled(); {
			case n == 0:
				t.Error("Redis's count was never sampled")
			case bad != "":
				t.Errorf("Redis counts other than %d permits in all %s (%d samples)", set, bad, n)
			}
			within(t, tc.settle, "every permit back", func() bool {
				n, err := handles[1].AvailablePermits(ctx)
				return err == nil && n == set
			})
			if n := f.admin.ZCard(ctx, redisio.PermitTimeouts(name)).Val(); n != 0 {
				t.Fatalf("%d permits still held after every holder released", n)
			}
			most, at := mostHeld(f.log)
			t.Logf("%d uses, most held at once %d (at %s); calls failed: %d acquire, %d release",
				len(f.log), most, at.Format("15:04:05.000"), f.acqErrs.Load(), f.relErrs.Load())
			if most > set {
				t.Fatalf("%d permits in use at once at %s; %d exist", most, at.Format("15:04:05.000000"), set)
			}
		})
	}
}

// permitFaultEnv is what a TestPermitSemaphoreFaults row works with.
type permitFaultEnv struct {
	srv   *redistest.Server
	admin *redis.Client
	hook  *faultHook

	uses             atomic.Int64 // permits used so far
	acqErrs, relErrs atomic.Int64
	mu               sync.Mutex
	log              []section // each use of a permit
	ids              map[string]bool
}

// Per-call deadlines, and how late past one a call may return.
const (
	permitAcquireWithin = time.Second
	permitReleaseWithin = time.Second
	permitCallSlack     = time.Second // a loaded 2-core machine under -race
)

// holder acquires, uses and releases permits until stop is closed.
func (f *permitFaultEnv) holder(t *testing.T, s *lockactor.PermitSemaphore, lease time.Duration, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		called := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), permitAcquireWithin)
		id, err := s.Acquire(ctx, lease)
		cancel()
		got := time.Now()
		if d := got.Sub(called); d > permitAcquireWithin+permitCallSlack {
			t.Errorf("Acquire returned %v after its call, with a %v ctx", d, permitAcquireWithin)
		}
		if err != nil {
			f.acqErrs.Add(1)
			continue
		}
		time.Sleep(2 * time.Millisecond) // the work
		released := time.Now()
		ctx, cancel = context.WithTimeout(context.Background(), permitReleaseWithin)
		err = s.Release(ctx, id)
		cancel()
		if d := time.Since(released); d > permitReleaseWithin+permitCallSlack {
			t.Errorf("Release returned %v after its call, with a %v ctx", d, permitReleaseWithin)
		}
		if err != nil {
			f.relErrs.Add(1) // given back in the background, or its lease had ended
		}
		f.mu.Lock()
		if f.ids == nil {
			f.ids = map[string]bool{}
		}
		if f.ids[id] {
			t.Errorf("permit id %s granted twice", id)
		}
		f.ids[id] = true
		f.log = append(f.log, section{id, got, minTime(released, called.Add(lease))})
		f.mu.Unlock()
		f.uses.Add(1)
	}
}

// progress waits until n more permits have been used.
func (f *permitFaultEnv) progress(t *testing.T, n int) {
	t.Helper()
	target := f.uses.Load() + int64(n)
	within(t, 20*time.Second, fmt.Sprintf("%d more uses of a permit", n), func() bool { return f.uses.Load() >= target })
}

// sample checks, every 10 ms until stopped, that Redis counts set permits
// in all: available plus held. The func it returns stops it and reports
// how many samples it took and the first that broke the rule.
func (f *permitFaultEnv) sample(t *testing.T, name string, set int) func() (int, string) {
	rdb := f.srv.ClientWith(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.MaxRetries = -1 })
	type result struct {
		n   int
		bad string
	}
	done, out := make(chan struct{}), make(chan result, 1)
	go func() {
		var r result
		defer func() { out <- r }()
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			var count *redis.StringCmd
			var held *redis.IntCmd
			_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				count = p.Get(ctx, name)
				held = p.ZCard(ctx, redisio.PermitTimeouts(name))
				return nil
			})
			cancel()
			if err != nil {
				continue // stopped, or killed: no reading
			}
			r.n++
			if c, _ := count.Int(); c+int(held.Val()) != set && r.bad == "" {
				r.bad = fmt.Sprintf("at %s: %d available and %d held", time.Now().Format("15:04:05.000"), c, held.Val())
			}
		}
	}()
	return func() (int, string) {
		close(done)
		r := <-out
		return r.n, r.bad
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// killNamed kills the server's connections named name (CLIENT SETNAME),
// command and pub/sub alike, and returns how many it killed.
func killNamed(t *testing.T, admin *redis.Client, name string) int64 {
	t.Helper()
	ctx := context.Background()
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	var n int64
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if !strings.Contains(" "+line+" ", " name="+name+" ") {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
		if k, err := admin.Do(ctx, "CLIENT", "KILL", "ID", id).Int64(); err == nil {
			n += k
		}
	}
	return n
}

// A request whose reply was lost while Redis stayed out of reach for longer
// than its latch record lives: its outcome is unknown. The caller hears an
// error; the count never goes above the set count, and a permit taken for
// nobody comes back when its lease ends.
func TestPermitSemaphoreUnknownOutcome(t *testing.T) {
	t.Parallel() // its own server; it mostly waits for records to expire
	const set, lease = 2, 200 * time.Millisecond
	tests := []struct {
		name   string
		script *redis.Script
		call   func(ctx context.Context, s *lockactor.PermitSemaphore, held string) error
	}{
		{"acquire", scripts.Latched.PermitAcquire, func(ctx context.Context, s *lockactor.PermitSemaphore, _ string) error {
			_, err := s.Acquire(ctx, lease)
			return err
		}},
		{"release", scripts.Latched.PermitRelease, func(ctx context.Context, s *lockactor.PermitSemaphore, held string) error {
			return s.Release(ctx, held)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client(t)
			rdb, hook := hooked(t, srv)
			s := newClient(t, rdb, lockactor.WithLatchKeep(300*time.Millisecond)).PermitSemaphore("punknown")
			ctx := ctxFor(t, 20*time.Second)
			if ok, err := s.TrySetPermits(ctx, set); !ok || err != nil {
				t.Fatalf("TrySetPermits = %v, %v", ok, err)
			}
			held, err := s.Acquire(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			hook.once(t, rdb, tc.script, faultRule{lose: true})
			resolve := hook.add(&faultRule{match: evalOf(scripts.Resolve.Hash()), times: -1, refuse: true})
			if err := tc.call(ctx, s, held); err == nil {
				t.Fatal("a call whose reply was lost and could not be settled returned nil")
			}
			// Past the record's life (keep, and twice the lease for an acquire).
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				if count, ids := permitState(t, admin, "punknown"); count+len(ids) != set || count > set {
					t.Fatalf("count %d with %d held: Redis counts other than %d permits", count, len(ids), set)
				}
				time.Sleep(20 * time.Millisecond)
			}
			hook.stop(resolve)
			want := set - 1 // the permit held is still held (or given back once, by the release)
			if tc.name == "release" {
				want = set
			}
			within(t, 5*time.Second, "the count settled", func() bool {
				n, err := s.AvailablePermits(ctx)
				return err == nil && n == want
			})
			if count, ids := permitState(t, admin, "punknown"); count > set || count+len(ids) != set {
				t.Fatalf("count %d with %d held, want %d in all", count, len(ids), set)
			}
		})
	}
}
