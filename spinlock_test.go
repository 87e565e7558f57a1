package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// subscribedConns lists the connections named name in CLIENT LIST that
// listen on any channel or pattern (sub, psub or ssub above 0), and how many
// connections carry that name at all.
func subscribedConns(t *testing.T, admin *redis.Client, name string) (subscribed []string, named int) {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if !strings.Contains(" "+line+" ", " name="+name+" ") {
			continue
		}
		named++
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			if (k == "sub" || k == "psub" || k == "ssub") && v != "0" {
				subscribed = append(subscribed, line)
				break
			}
		}
	}
	return subscribed, named
}

// TestSpinLockNeverSubscribes watches a waiter of each kind while another
// Client holds the lock: Lock's waiter listens on the lock's channel (which
// shows the check can see a subscription), SpinLock's never does.
func TestSpinLockNeverSubscribes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		handle   func(*lockactor.Client, string) *lockactor.Lock
		wantSubs int64
	}{
		{"Lock subscribes", (*lockactor.Client).Lock, 1},
		{"SpinLock does not", (*lockactor.Client).SpinLock, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			srv.NeedsReal(t, "CLIENT LIST, to count the subscribed connections")
			admin := srv.Client(t)
			const connName = "spin-under-test"
			waiters := newClient(t, srv.ClientWith(t, func(o *redis.Options) { o.ClientName = connName }))
			ctx := ctxFor(t, 10*time.Second)
			holder := newClient(t, srv.Client(t)).Lock("nosub")
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 3)
			for range 3 {
				l := tc.handle(waiters, "nosub")
				go func() {
					err := l.Lock(ctx)
					if err == nil {
						err = l.Unlock(ctx)
					}
					got <- err
				}()
			}
			time.Sleep(400 * time.Millisecond) // queued, retrying, subscribed if it ever will
			n, err := admin.PubSubNumSub(ctx, "redisson_lock__channel:{nosub}").Result()
			if err != nil {
				t.Fatal(err)
			}
			if n["redisson_lock__channel:{nosub}"] != tc.wantSubs {
				t.Errorf("PUBSUB NUMSUB = %d, want %d", n["redisson_lock__channel:{nosub}"], tc.wantSubs)
			}
			subs, named := subscribedConns(t, admin, connName)
			if named == 0 {
				t.Fatal("CLIENT LIST shows no connection of the waiters' Client")
			}
			if spin := tc.wantSubs == 0; spin && len(subs) > 0 {
				t.Errorf("the SpinLock's Client has subscribed connections:\n%s", strings.Join(subs, "\n"))
			} else if !spin && len(subs) == 0 {
				t.Error("CLIENT LIST shows no subscribed connection for the Lock waiters")
			}
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				select {
				case err := <-got:
					if err != nil {
						t.Fatalf("waiter: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("a waiter never got the lock after Unlock")
				}
			}
		})
	}
}

// TestSpinLockExcludesLock checks each pairing of kinds across two Clients:
// while one holds, the other is refused and waits; the holder's Unlock lets
// it in.
func TestSpinLockExcludesLock(t *testing.T) {
	t.Parallel()
	lock, spin := (*lockactor.Client).Lock, (*lockactor.Client).SpinLock
	tests := []struct {
		name           string
		holder, waiter func(*lockactor.Client, string) *lockactor.Lock
	}{
		{"Lock holds, SpinLock waits", lock, spin},
		{"SpinLock holds, Lock waits", spin, lock},
		{"SpinLock holds, SpinLock waits", spin, spin},
	}
	srv := redistest.Start(t)
	a := newClient(t, srv.Client(t))
	b := newClient(t, srv.Client(t), lockactor.WithSpinBackoff(time.Millisecond, 20*time.Millisecond))
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 10*time.Second)
			name := fmt.Sprintf("excl-%d", i)
			holder, waiter := tc.holder(a, name), tc.waiter(b, name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, err := waiter.TryLock(ctx); ok || err != nil {
				t.Fatalf("TryLock while the other kind holds = %v, %v; want false, nil", ok, err)
			}
			got := make(chan error, 1)
			go func() { got <- waiter.Lock(ctx) }()
			select {
			case err := <-got:
				t.Fatalf("Lock returned while the other kind holds: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("waiter not granted after the holder's Unlock")
			}
			if ok, _ := holder.TryLock(ctx); ok {
				t.Fatal("the first holder took the lock back while the waiter holds it")
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSpinLockMutualExclusion runs Lock and SpinLock workers of two Clients
// on one name and counts who is inside.
func TestSpinLockMutualExclusion(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clients := []*lockactor.Client{
		newClient(t, srv.Client(t), lockactor.WithSpinBackoff(time.Millisecond, 10*time.Millisecond)),
		newClient(t, srv.Client(t), lockactor.WithSpinBackoff(time.Millisecond, 10*time.Millisecond)),
	}
	ctx := ctxFor(t, 60*time.Second)
	const workers, rounds = 4, 25
	var inside, most, done atomic.Int64
	counter := 0
	var wg sync.WaitGroup
	for ci, c := range clients {
		for w := range workers {
			l := c.SpinLock("mutex")
			if w%2 == 1 {
				l = c.Lock("mutex")
			}
			wg.Go(func() {
				for range rounds {
					if err := l.Lock(ctx); err != nil {
						t.Errorf("client %d worker %d: %v", ci, w, err)
						return
					}
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					counter++ // unsynchronised: the race detector sees two holders
					time.Sleep(200 * time.Microsecond)
					inside.Add(-1)
					done.Add(1)
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d holders at once", m)
	}
	if want := int64(len(clients) * workers * rounds); done.Load() != want || int64(counter) != want {
		t.Fatalf("%d critical sections (counter %d), want %d", done.Load(), counter, want)
	}
}

// TestSpinLockWakeBound measures how soon a SpinLock waiter notices that a
// holder in another Client has released: within the backoff cap, plus
// slack for a shared machine. The holder's lease is 30 s, so only the
// retries can be what wakes it.
func TestSpinLockWakeBound(t *testing.T) {
	for _, spinCap := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
		t.Run(spinCap.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			holder := newClient(t, srv.Client(t)).Lock("wake")
			waiter := newClient(t, srv.Client(t), lockactor.WithSpinBackoff(time.Millisecond, spinCap)).SpinLock("wake")
			ctx := ctxFor(t, 10*time.Second)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			woke := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error { return holder.Unlock(ctx) })
			t.Logf("woke %v after the release (cap %v)", woke, spinCap)
			if bound := spinCap + 300*time.Millisecond; woke > bound {
				t.Fatalf("woke %v after the release, want within %v", woke, bound)
			}
		})
	}
}

// TestSpinLockCancelAndClose: a waiting SpinLock returns promptly when its
// ctx ends, and with ErrClosed when its Client closes.
func TestSpinLockCancelAndClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	holder := newClient(t, srv.Client(t)).Lock("spin-cancel")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := lockactor.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	waitCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.SpinLock("spin-cancel").Lock(waitCtx) }()
	time.Sleep(200 * time.Millisecond)
	cancel()
	cancelled := time.Now()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock after cancel = %v, want context.Canceled", err)
	}
	if d := time.Since(cancelled); d > 250*time.Millisecond {
		t.Fatalf("Lock returned %v after cancel", d)
	}

	const n = 5
	errs := make(chan error, n)
	for range n {
		l := c.SpinLock("spin-cancel")
		go func() { errs <- l.Lock(ctx) }()
	}
	time.Sleep(200 * time.Millisecond)
	_ = c.Close()
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, lockactor.ErrClosed) {
				t.Fatalf("waiter after Close = %v, want ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("waiter still blocked after Close")
		}
	}
}

// TestSpinBackoffValidated: New refuses a backoff that cannot space retries
// and takes every sound one, a first step equal to the cap included.
func TestSpinBackoffValidated(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	tests := []struct {
		name     string
		min, max time.Duration
		ok       bool
	}{
		{"zero min", 0, time.Second, false},
		{"negative min", -time.Millisecond, time.Second, false},
		{"max below min", 10 * time.Millisecond, time.Millisecond, false},
		{"zero max", time.Millisecond, 0, false},
		{"min equals max", 5 * time.Millisecond, 5 * time.Millisecond, true},
		{"Redisson's defaults", time.Millisecond, 128 * time.Millisecond, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := lockactor.New(rdb, lockactor.WithSpinBackoff(tc.min, tc.max))
			if c != nil {
				defer c.Close()
			}
			switch {
			case tc.ok && err != nil:
				t.Fatalf("New = %v, want a Client", err)
			case !tc.ok && !errors.Is(err, lockactor.ErrInvalidArgument):
				t.Fatalf("New = %v, want ErrInvalidArgument", err)
			}
		})
	}
}
