package lockactor_test

import (
	"context"
	"errors"
	"net"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Every error names the kind it concerns and the name, and still matches its
// sentinel: before, a permit's "not held", a semaphore's and a latch's Redis
// errors all read `lock "name": ...`.
func TestErrorsNameTheirKind(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	ctx := ctxFor(t, 10*time.Second)
	if err := rdb.HSet(ctx, "a-hash", "someone", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.PermitSemaphore("pp").TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	nobody := "00112233445566778899aabbccddeeff"
	tests := []struct {
		name   string
		call   func() error
		prefix string
		is     error  // nil: any Redis error
		says   string // the Redis error's text holds this (its wording differs on the fallback)
	}{
		{"Lock", func() error { return c.Lock("l").Lock(ctx, lockactor.WithLease(-1)) }, `lock "l": `, lockactor.ErrInvalidArgument, ""},
		{"FairLock", func() error { return c.FairLock("f").Unlock(ctx) }, `fair lock "f": `, lockactor.ErrNotHeld, ""},
		{"FencedLock", func() error { return c.FencedLock("x").Unlock(ctx) }, `fenced lock "x": `, lockactor.ErrNotHeld, ""},
		{"SpinLock", func() error { return c.SpinLock("s").Extend(ctx, 0) }, `spin lock "s": `, lockactor.ErrInvalidArgument, ""},
		{"read view", func() error { return c.ReadWriteLock("rw").ReadLock().Unlock(ctx) }, `read lock "rw": `, lockactor.ErrNotHeld, ""},
		{"write view", func() error { return c.ReadWriteLock("rw").WriteLock().Unlock(ctx) }, `write lock "rw": `, lockactor.ErrNotHeld, ""},
		{"Semaphore on a lock's hash", func() error { return c.Semaphore("a-hash").Release(ctx, 1) }, `semaphore "a-hash": `, nil, "WRONGTYPE"},
		{"PermitSemaphore not held", func() error { return c.PermitSemaphore("pp").Release(ctx, nobody) },
			`permit semaphore "pp": lockactor: permit ` + nobody + ` not held`, lockactor.ErrNotHeld, ""},
		{"CountDownLatch on a lock's hash", func() error { return c.CountDownLatch("a-hash").CountDown(ctx) }, `count-down latch "a-hash": `, nil, "WRONGTYPE"},
		{"MultiLock", func() error { return lockactor.NewMultiLock(c.Lock("m1"), c.Lock("m2")).Unlock(ctx) }, `multilock "m1,m2": `, lockactor.ErrNotHeld, ""},
		{"RedLock", func() error { _, err := lockactor.NewRedLock(c.Lock("r1"), nil).TryLock(ctx); return err }, `redlock "r1,<nil>": `, lockactor.ErrInvalidArgument, ""},
		{"ctx ended", func() error {
			done, cancel := context.WithCancel(ctx)
			cancel()
			return c.Semaphore("sem").Acquire(done, 1)
		}, `semaphore "sem": `, context.Canceled, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			switch {
			case err == nil:
				t.Fatal("no error")
			case !strings.HasPrefix(err.Error(), tc.prefix):
				t.Fatalf("error %q, want it to start with %q", err, tc.prefix)
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Fatalf("error %q does not match %v", err, tc.is)
			case !strings.Contains(err.Error(), tc.says):
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
		})
	}
}

// TestGroupFailuresCarryMemberErrors: whatever fails inside a RedLock's or
// a MultiLock's TryLock or Unlock reaches the caller as an ErrNoQuorum error
// carrying one *lockactor.MemberError per failed member, with that member's
// name and its cause, and none of the actors package's own type.
func TestGroupFailuresCarryMemberErrors(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 60*time.Second)
	closeClient := func(t *testing.T, c *lockactor.Client) {
		t.Helper()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// run sets the members up on three Clients of three servers (and
		// breaks some), then makes the failing call; it returns the call's
		// error and the members that must be reported failed.
		run   func(t *testing.T, servers []*redistest.Server, clients []*lockactor.Client) (failed []string, err error)
		cause error // what every failed member's Err must match
	}{
		{"RedLock TryLock, 2 of 3 Clients closed", func(t *testing.T, servers []*redistest.Server, cs []*lockactor.Client) (failed []string, err error) {
			rl := lockactor.NewRedLock(cs[0].Lock("rl-try-a"), cs[1].Lock("rl-try-b"), cs[2].Lock("rl-try-c"))
			closeClient(t, cs[1])
			closeClient(t, cs[2])
			ok, err := rl.TryLock(ctx)
			if ok {
				t.Fatal("TryLock held with 2 of 3 Clients closed")
			}
			return []string{"rl-try-b", "rl-try-c"}, err
		}, lockactor.ErrClosed},
		{"RedLock Unlock, 2 of 3 Clients closed while held", func(t *testing.T, servers []*redistest.Server, cs []*lockactor.Client) (failed []string, err error) {
			rl := lockactor.NewRedLock(cs[0].Lock("rl-un-a"), cs[1].Lock("rl-un-b"), cs[2].Lock("rl-un-c"))
			if ok, err := rl.TryLock(ctx); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			closeClient(t, cs[1])
			closeClient(t, cs[2])
			return []string{"rl-un-b", "rl-un-c"}, rl.Unlock(ctx)
		}, lockactor.ErrClosed},
		{"MultiLock TryLock, one member's Client closed", func(t *testing.T, servers []*redistest.Server, cs []*lockactor.Client) (failed []string, err error) {
			ml := lockactor.NewMultiLock(cs[0].Lock("ml-try-a"), cs[1].Lock("ml-try-b"))
			closeClient(t, cs[1])
			ok, err := ml.TryLock(ctx)
			if ok {
				t.Fatal("TryLock held with a member's Client closed")
			}
			return []string{"ml-try-b"}, err
		}, lockactor.ErrClosed},
		{"MultiLock Unlock, one member's Client closed while held", func(t *testing.T, servers []*redistest.Server, cs []*lockactor.Client) (failed []string, err error) {
			ml := lockactor.NewMultiLock(cs[0].Lock("ml-un-a"), cs[1].Lock("ml-un-b"), cs[2].Lock("ml-un-c"))
			if ok, err := ml.TryLock(ctx); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			closeClient(t, cs[2])
			return []string{"ml-un-c"}, ml.Unlock(ctx)
		}, lockactor.ErrClosed},
		{"MultiLock TryLock, one member's server stopped", func(t *testing.T, servers []*redistest.Server, cs []*lockactor.Client) (failed []string, err error) {
			ml := lockactor.NewMultiLock(cs[0].Lock("ml-dead-a"), cs[1].Lock("ml-dead-b"))
			servers[1].Kill(t)
			ok, err := ml.TryLock(ctx)
			if ok {
				t.Fatal("TryLock held with a member's server stopped")
			}
			return []string{"ml-dead-b"}, err
		}, syscall.ECONNREFUSED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers, clients := redlockNodes(t, 3)
			failed, err := tt.run(t, servers, clients)
			if !errors.Is(err, lockactor.ErrNoQuorum) {
				t.Fatalf("err = %v, want ErrNoQuorum", err)
			}
			var me *lockactor.MemberError
			if !errors.As(err, &me) {
				t.Fatalf("errors.As(%v, *lockactor.MemberError) found none", err)
			}
			var internal *actors.MemberError
			if errors.As(err, &internal) {
				t.Fatalf("err %v carries an *actors.MemberError: %+v", err, internal)
			}
			if !errors.Is(err, tt.cause) {
				t.Fatalf("err %v does not match the cause %v", err, tt.cause)
			}
			got := memberErrorsIn(err)
			var names []string
			for name, me := range got {
				names = append(names, name)
				if !errors.Is(me.Err, tt.cause) || !errors.Is(me, tt.cause) {
					t.Errorf("member %q: Err = %v, want %v", name, me.Err, tt.cause)
				}
			}
			sort.Strings(names)
			if len(names) != len(failed) {
				t.Fatalf("failed members = %v, want %v (err %v)", names, failed, err)
			}
			for i := range failed {
				if names[i] != failed[i] {
					t.Fatalf("failed members = %v, want %v (err %v)", names, failed, err)
				}
			}
		})
	}
}

// TestMemberErrorFormat: a MemberError names its member and its cause, and
// unwraps to the cause.
func TestMemberErrorFormat(t *testing.T) {
	cause := errors.New("boom")
	tests := []struct {
		name string
		me   *lockactor.MemberError
		want string
	}{
		{"plain", &lockactor.MemberError{Name: "orders", Err: cause}, `member "orders": boom`},
		{"sentinel", &lockactor.MemberError{Name: "a b", Err: lockactor.ErrClosed}, `member "a b": ` + lockactor.ErrClosed.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.me.Error(); got != tt.want {
				t.Fatalf("Error() = %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.me, tt.me.Err) {
				t.Fatalf("errors.Is(%v, its Err) = false", tt.me)
			}
		})
	}
}

// TestNoQuorumErrorCarriesMemberErrors: a member that fails inside a
// RedLock round reaches the caller as a *lockactor.MemberError inside an
// ErrNoQuorum error, and a member whose Client was closed matches
// lockactor.ErrClosed through it.
func TestNoQuorumErrorCarriesMemberErrors(t *testing.T) {
	t.Parallel()
	_, clients := redlockNodes(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	rl, _ := redLockOn(clients, "rl-errors")
	for _, c := range clients[1:] {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ok, err := rl.TryLock(ctx)
	if ok || !errors.Is(err, lockactor.ErrNoQuorum) {
		t.Fatalf("TryLock with 2 of 3 Clients closed = %v, %v; want ErrNoQuorum", ok, err)
	}
	var me *lockactor.MemberError
	if !errors.As(err, &me) || me.Name != "rl-errors" {
		t.Fatalf("errors.As(%v, *MemberError) = %v, %+v", err, errors.As(err, &me), me)
	}
	if !errors.Is(err, lockactor.ErrClosed) {
		t.Fatalf("a closed member's error %v does not match ErrClosed", err)
	}
}

// An unreachable Redis is not a busy lock: with a wrong address every call
// fails within about a second naming the refused connection (before, a
// single-attempt TryLock took 10s to say so, and a Lock or TryLock whose
// ctx ended first said only "context deadline exceeded"). The Client uses
// go-redis's default options: its retries are not ours to count on.
func TestUnreachableRedisNamesTheCause(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: closedPort(t)})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb)
	tests := []struct {
		name string
		ctx  time.Duration
		call func(ctx context.Context) error
	}{
		{"TryLock", 10 * time.Second, func(ctx context.Context) error { _, err := c.Lock("x").TryLock(ctx); return err }},
		{"TryLock, 2s ctx", 2 * time.Second, func(ctx context.Context) error { _, err := c.Lock("x").TryLock(ctx); return err }},
		{"Lock, 10s ctx", 10 * time.Second, func(ctx context.Context) error { return c.Lock("x").Lock(ctx) }},
		{"Mutex Lock", 10 * time.Second, func(ctx context.Context) error { return c.Mutex("x").Lock(ctx) }},
		{"FairLock TryLock with a wait", 10 * time.Second, func(ctx context.Context) error {
			_, err := c.FairLock("x").TryLock(ctx, lockactor.WithWait(5*time.Second))
			return err
		}},
		{"Semaphore TryAcquire", 10 * time.Second, func(ctx context.Context) error { _, err := c.Semaphore("s").TryAcquire(ctx, 1, 0); return err }},
		{"PermitSemaphore Acquire", 10 * time.Second, func(ctx context.Context) error {
			_, err := c.PermitSemaphore("p").Acquire(ctx, time.Second)
			return err
		}},
		{"CountDownLatch CountDown", 10 * time.Second, func(ctx context.Context) error { return c.CountDownLatch("l").CountDown(ctx) }},
		{"CountDownLatch Await", 10 * time.Second, func(ctx context.Context) error { return c.CountDownLatch("l").Await(ctx) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			start := time.Now()
			err := tc.call(ctx)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "connection refused") {
				t.Fatalf("error %v after %v, want it to name the refused connection", err, took)
			}
			if took > 1500*time.Millisecond {
				t.Fatalf("took %v to fail: %v", took, err)
			}
		})
	}
}

// A call whose ctx ends while Redis cannot be reached says why: its error
// matches the ctx's and names the last Redis error. Here the server was
// there when the Client began, and stops answering (SIGSTOP) while a Lock
// waits behind another Client's hold.
func TestCtxEndNamesTheLastRedisError(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	if srv.Embedded() {
		t.Skip("needs a real redis-server (SIGSTOP): apt-get install -y redis-server")
	}
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	if err := c.Lock("ctx-cause").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err := c.Lock("ctx-cause").Lock(lctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last Redis error") {
		t.Fatalf("Lock on a stopped server = %v; want DeadlineExceeded naming the last Redis error", err)
	}
}

// memberErrorsIn collects every *lockactor.MemberError in err's tree (a
// failure of several members joins them), keyed by member name.
func memberErrorsIn(err error) map[string]*lockactor.MemberError {
	found := map[string]*lockactor.MemberError{}
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
			return
		case *lockactor.MemberError:
			found[e.Name] = e
		case interface{ Unwrap() []error }:
			for _, part := range e.Unwrap() {
				walk(part)
			}
			return
		}
		walk(errors.Unwrap(err))
	}
	walk(err)
	return found
}

// closedPort is a loopback address nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
