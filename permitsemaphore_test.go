package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

var permitID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// setPermits makes a fresh permit semaphore of n permits on its own Client.
func setPermits(t *testing.T, rdb redis.UniversalClient, name string, n int) *lockactor.PermitSemaphore {
	t.Helper()
	s := newClient(t, rdb).PermitSemaphore(name)
	if ok, err := s.TrySetPermits(ctxFor(t, 10*time.Second), n); !ok || err != nil {
		t.Fatalf("TrySetPermits(%d) = %v, %v", n, ok, err)
	}
	return s
}

func TestPermitSemaphoreTrySetPermitsOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	s := setPermits(t, srv.Client(t), "pset", 2)
	if ok, err := s.TrySetPermits(ctx, 5); ok || err != nil {
		t.Fatalf("second TrySetPermits = %v, %v; want false, nil", ok, err)
	}
	if n, err := s.AvailablePermits(ctx); n != 2 || err != nil {
		t.Fatalf("AvailablePermits = %d, %v; want 2", n, err)
	}
	if s.Name() != "pset" {
		t.Fatalf("Name = %q", s.Name())
	}
}

func TestPermitSemaphoreAcquireRelease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	s := setPermits(t, srv.Client(t), "pround", 2)
	a, err := s.Acquire(ctx, time.Minute)
	if err != nil || !permitID.MatchString(a) {
		t.Fatalf("Acquire = %q, %v; want a 32-hex-digit id", a, err)
	}
	b, ok, err := s.TryAcquire(ctx, time.Minute, 0)
	if !ok || err != nil || b == a {
		t.Fatalf("TryAcquire = %q, %v, %v (first id %q)", b, ok, err, a)
	}
	if _, ok, err := s.TryAcquire(ctx, time.Minute, 0); ok || err != nil {
		t.Fatalf("TryAcquire with none left = %v, %v", ok, err)
	}
	for _, id := range []string{a, b} {
		if err := s.Release(ctx, id); err != nil {
			t.Fatalf("Release(%s): %v", id, err)
		}
	}
	if n, _ := s.AvailablePermits(ctx); n != 2 {
		t.Fatalf("AvailablePermits after both releases = %d, want 2", n)
	}
	if err := s.Release(ctx, a); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	if n, _ := s.AvailablePermits(ctx); n != 2 {
		t.Fatalf("a refused Release changed the count to %d", n)
	}
}

func TestPermitSemaphoreNeverExceedsPermits(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	const permits = 3
	setPermits(t, srv.Client(t), "pconc", permits)
	var inside, peak atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		s := newClient(t, srv.Client(t)).PermitSemaphore("pconc")
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < 8; r++ {
					id, err := s.Acquire(ctx, 30*time.Second)
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					n := inside.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := s.Release(ctx, id); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if p := peak.Load(); p > permits || p == 0 {
		t.Fatalf("peak of %d permits in use at once; %d exist", p, permits)
	}
	if n, _ := newClient(t, srv.Client(t)).PermitSemaphore("pconc").AvailablePermits(ctx); n != permits {
		t.Fatalf("AvailablePermits at the end = %d, want %d", n, permits)
	}
}

func TestPermitSemaphoreTryAcquireWaitTimesOut(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	s := setPermits(t, srv.Client(t), "ptry", 1)
	if _, err := s.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	id, ok, err := s.TryAcquire(ctx, time.Minute, 200*time.Millisecond)
	if ok || err != nil || id != "" {
		t.Fatalf("TryAcquire with none left = %q, %v, %v", id, ok, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("TryAcquire gave up after %v, want about 200ms", d)
	}
}

// The key point: Redis, not the holder, ends a lease. Nobody releases, and a
// blocked Acquire on another Client still gets the permit once the lease
// ends, with no message to wake it.
func TestPermitSemaphoreLeaseEndsWithoutRelease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	s := setPermits(t, srv.Client(t), "plapse", 1)
	const lease = 400 * time.Millisecond
	start := time.Now()
	old, err := s.Acquire(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	other := newClient(t, srv.Client(t)).PermitSemaphore("plapse")
	if _, ok, _ := other.TryAcquire(ctx, time.Minute, 0); ok {
		t.Fatal("took a second permit of one")
	}
	id, err := other.Acquire(ctx, time.Minute)
	waited := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if waited < lease-50*time.Millisecond || waited > lease+300*time.Millisecond {
		t.Fatalf("the blocked Acquire got the permit after %v; the lease was %v", waited, lease)
	}
	if err := s.Release(ctx, old); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Release of an expired permit = %v, want ErrNotHeld", err)
	}
	if err := s.UpdateLease(ctx, old, time.Minute); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("UpdateLease of an expired permit = %v, want ErrNotHeld", err)
	}
	if n, _ := s.AvailablePermits(ctx); n != 0 {
		t.Fatalf("AvailablePermits = %d while %s holds the only permit", n, id)
	}
}

func TestPermitSemaphoreUpdateLeaseExtends(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	s := setPermits(t, srv.Client(t), "pupdate", 1)
	id, err := s.Acquire(ctx, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateLease(ctx, id, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // past the first lease
	if n, _ := s.AvailablePermits(ctx); n != 0 {
		t.Fatalf("AvailablePermits = %d: the extended permit came back", n)
	}
	if err := s.UpdateLease(ctx, id, 100*time.Millisecond); err != nil { // shorter
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n, _ := s.AvailablePermits(ctx); n != 1 {
		t.Fatalf("AvailablePermits = %d after the shortened lease ended, want 1", n)
	}
}

func TestPermitSemaphoreAddPermits(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	s := setPermits(t, srv.Client(t), "padd", 3)
	for _, step := range []struct {
		add, want int
		canTake   bool
	}{
		{-2, 1, true},   // 1 left, then taken and released
		{-2, -1, false}, // below zero: nothing to take
		{3, 2, true},
	} {
		if err := s.AddPermits(ctx, step.add); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.AvailablePermits(ctx); n != step.want {
			t.Fatalf("after AddPermits(%d): %d available, want %d", step.add, n, step.want)
		}
		id, ok, err := s.TryAcquire(ctx, time.Minute, 0)
		if ok != step.canTake || err != nil {
			t.Fatalf("with %d available TryAcquire = %v, %v", step.want, ok, err)
		}
		if ok {
			if err := s.Release(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestPermitSemaphoreInvalidArguments(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	c := newClient(t, srv.Client(t))
	s, empty := c.PermitSemaphore("pinv"), c.PermitSemaphore("")
	const id = "0123456789abcdef0123456789abcdef"
	for name, call := range map[string]func() error{
		"empty name":            func() error { _, err := empty.Acquire(ctx, time.Second); return err },
		"empty name available":  func() error { _, err := empty.AvailablePermits(ctx); return err },
		"TrySetPermits 0":       func() error { _, err := s.TrySetPermits(ctx, 0); return err },
		"TrySetPermits -1":      func() error { _, err := s.TrySetPermits(ctx, -1); return err },
		"Acquire lease 0":       func() error { _, err := s.Acquire(ctx, 0); return err },
		"TryAcquire lease -1":   func() error { _, _, err := s.TryAcquire(ctx, -1, 0); return err },
		"TryAcquire wait -1":    func() error { _, _, err := s.TryAcquire(ctx, time.Second, -1); return err },
		"Release empty id":      func() error { return s.Release(ctx, "") },
		"Release non-hex id":    func() error { return s.Release(ctx, "not an id") },
		"UpdateLease empty id":  func() error { return s.UpdateLease(ctx, "", time.Second) },
		"UpdateLease lease 0":   func() error { return s.UpdateLease(ctx, id, 0) },
		"UpdateLease lease -1s": func() error { return s.UpdateLease(ctx, id, -time.Second) },
	} {
		if err := call(); !errors.Is(err, lockactor.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if n, err := srv.Client(t).Exists(ctx, "pinv").Result(); n != 0 || err != nil {
		t.Fatalf("a refused call wrote to Redis: %d, %v", n, err)
	}
}

func TestPermitSemaphoreCancelAndClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 10*time.Second)
	s := setPermits(t, srv.Client(t), "pcancel", 1)
	held, err := s.Acquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv.Client(t))
	w := c.PermitSemaphore("pcancel")
	cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if _, err := w.Acquire(cctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with none left and a 150ms ctx = %v", err)
	}
	got := make(chan error, 1)
	go func() { _, err := w.Acquire(ctx, time.Minute); got <- err }()
	time.Sleep(100 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, lockactor.ErrClosed) {
			t.Fatalf("Acquire waiting through Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still waits after Close")
	}
	if _, err := w.AvailablePermits(ctx); !errors.Is(err, lockactor.ErrClosed) {
		t.Fatalf("AvailablePermits after Close = %v, want ErrClosed", err)
	}
	if err := s.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.AvailablePermits(ctx); n != 1 {
		t.Fatalf("AvailablePermits = %d: a cancelled or closed Acquire kept a permit", n)
	}
}

// The crashed holder: a child process (this test binary re-executed with
// permitChildEnv set) takes permits with a short lease and is killed with
// SIGKILL; its permits come back once the leases end, with nobody releasing.

const permitChildEnv = "LOCKACTOR_PERMIT_CHILD" // "<redis addr>" in the child

const (
	permitCrashName  = "pcrash"
	permitCrashIDs   = "pcrash:ids" // the child's permit ids
	permitCrashLease = time.Second
)

// permitChild takes 2 permits for permitCrashLease, reports their ids and
// waits to be killed.
func permitChild(addr string) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := lockactor.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	s := c.PermitSemaphore(permitCrashName)
	for range 2 {
		id, err := s.Acquire(ctx, permitCrashLease)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		rdb.RPush(ctx, permitCrashIDs, id)
	}
	select {} // until SIGKILL
}

func TestPermitSemaphoreCrashedHolderPermitsComeBack(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	if srv.Embedded() {
		t.Skip("needs a real redis-server for a child process")
	}
	ctx := ctxFor(t, 30*time.Second)
	rdb := srv.Client(t)
	s := setPermits(t, rdb, permitCrashName, 2)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), permitChildEnv+"="+srv.Addr())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill(); <-done }()
	within(t, 10*time.Second, "the child to hold 2 permits", func() bool {
		return rdb.LLen(ctx, permitCrashIDs).Val() == 2
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := <-done; err == nil {
		t.Fatal("the child exited cleanly; it should have been killed")
	}
	done <- nil // for the deferred wait
	if n, _ := s.AvailablePermits(ctx); n != 0 {
		t.Fatalf("AvailablePermits right after the kill = %d, want 0", n)
	}
	// Two blocked Acquires get the dead child's permits once their leases end
	// (woken by the earliest deadline, not the once-a-second re-check).
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Acquire(ctx, time.Minute); err != nil {
				t.Errorf("Acquire: %v", err)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(killed); d > permitCrashLease+400*time.Millisecond {
		t.Fatalf("the dead child's permits came back %v after the kill; the lease was %v", d, permitCrashLease)
	}
	for _, id := range rdb.LRange(ctx, permitCrashIDs, 0, -1).Val() {
		if err := s.Release(ctx, id); !errors.Is(err, lockactor.ErrNotHeld) {
			t.Fatalf("Release of the dead child's permit %s = %v, want ErrNotHeld", id, err)
		}
	}
}
