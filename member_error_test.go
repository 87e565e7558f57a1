package lockactor_test

import (
	"errors"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/internal/redistest"
)

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

// TestGroupFailuresCarryMemberErrors: whatever fails inside a RedLock's or
// a MultiLock's TryLock or Unlock reaches the caller as an ErrNoQuorum error
// carrying one *lockactor.MemberError per failed member, with that member's
// name and its cause, and none of the actors package's own type.
func TestGroupFailuresCarryMemberErrors(t *testing.T) {
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
