//go:build full

package lockactor_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// aclSpinWatchdog is the watchdog of the restricted Clients in these tests:
// short, so that renewals happen several times in a test and a Lock waiter
// that hears no release message retries soon (its timer is the holder's
// remaining lease).
const aclSpinWatchdog = 600 * time.Millisecond

// spinModes are the two settings of WithSpinPublish, with the warnings a
// Client whose releases were refused their publish logs: one for the
// default (it asked to publish), none when quiet (it asked for nothing).
var spinModes = []struct {
	name  string
	opts  []lockactor.Option
	warns int
}{
	{"publish", nil, 1},
	{"quiet", []lockactor.Option{lockactor.WithSpinPublish(false)}, 0},
}

// TestSpinLockRestrictedPubSub runs every SpinLock call on Clients whose
// Redis user may not publish: the lock must work there, as it exists for
// such services, with releases publishing (the default, refused by the
// server) or not (WithSpinPublish(false)). Every call must succeed exactly
// as on an open server: Lock and Unlock (reentrant), TryLock with a wait
// against a second Client, contention between two Clients, watchdog
// renewals, ForceUnlock and Close. A Lock waiter (a Client allowed
// pub/sub) of the same name still gets the lock, within the holder's lease
// after the release. A publishing Client says once that the server refused
// it; a quiet one never tries, which the server's ACL LOG shows.
func TestSpinLockRestrictedPubSub(t *testing.T) {
	srv := startSpinACL(t)
	admin := srv.Client(t)
	for _, u := range spinACLs {
		for _, m := range spinModes {
			t.Run(u.user+"/"+m.name, func(t *testing.T) {
				if err := admin.Do(context.Background(), "acl", "log", "reset").Err(); err != nil {
					t.Fatal(err)
				}
				logs := spinUnderACL(t, srv, u.user, m.name, m.opts...)
				for i, l := range logs {
					if n := strings.Count(l.String(), "refused to publish"); n != m.warns {
						t.Errorf("Client %d logged %d warnings of a refused publish, want %d:\n%s", i, n, m.warns, l.String())
					}
				}
				refusals := aclLogOf(t, admin, u.user)
				switch {
				case m.warns == 0 && refusals != 0:
					t.Errorf("the server's ACL LOG has %d denials of user %s, want none: the quiet Client tried to publish", refusals, u.user)
				case m.warns > 0 && refusals == 0:
					t.Errorf("the server's ACL LOG has no denial of user %s: nothing was refused, so the test tests nothing", u.user)
				}
			})
		}
	}
}

// aclLogOf counts the denials ACL LOG holds for user (each entry counts
// its repeats).
func aclLogOf(t *testing.T, admin *redis.Client, user string) int64 {
	t.Helper()
	entries, err := admin.Do(context.Background(), "acl", "log").Slice()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		entry := map[any]any{} // a map under RESP3, field-value pairs under RESP2
		switch e := e.(type) {
		case map[any]any:
			entry = e
		case []any:
			for i := 0; i+1 < len(e); i += 2 {
				entry[e[i]] = e[i+1]
			}
		}
		if entry["username"] == user {
			c, _ := entry["count"].(int64)
			n += c
		}
	}
	return n
}

// spinUnderACL is the scenario of TestSpinLockRestrictedPubSub for user,
// with opts given to both restricted Clients; it returns their logs.
func spinUnderACL(t *testing.T, srv *redistest.Server, user, mode string, opts ...lockactor.Option) []*syncBuffer {
	ctx := ctxFor(t, 60*time.Second)
	opts = append([]lockactor.Option{
		lockactor.WithWatchdogTimeout(aclSpinWatchdog),
		lockactor.WithSpinBackoff(time.Millisecond, 20*time.Millisecond),
	}, opts...)
	logs := []*syncBuffer{{}, {}}
	logTo := func(b *syncBuffer) lockactor.Option {
		return lockactor.WithLogger(slog.New(slog.NewTextHandler(b, nil)))
	}
	a := newClient(t, asUser(t, srv, user), append(opts, logTo(logs[0]))...)
	b := newClient(t, asUser(t, srv, user), append(opts, logTo(logs[1]))...)
	name := func(s string) string { return user + "-" + mode + "-" + s }

	t.Run("LockUnlockReentrant", func(t *testing.T) {
		l := a.SpinLock(name("basic"))
		for i := range 2 {
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock %d: %v", i+1, err)
			}
		}
		if n, err := l.HoldCount(ctx); n != 2 || err != nil {
			t.Fatalf("HoldCount = %d, %v; want 2", n, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of one of two holds: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of the last hold: %v", err)
		}
		if locked, err := l.IsLocked(ctx); locked || err != nil {
			t.Fatalf("IsLocked after the last Unlock = %v, %v", locked, err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
			t.Fatalf("Unlock of nothing = %v, want ErrNotHeld", err)
		}
		select {
		case <-l.Lost():
			t.Fatal("Lost closed after an Unlock that released (it closes only for a hold lost before its Unlock)")
		default:
		}
		// The handle works again after a release.
		if ok, err := l.TryLock(ctx); !ok || err != nil {
			t.Fatalf("TryLock after the release = %v, %v", ok, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})

	t.Run("TryLockWaitSecondClient", func(t *testing.T) {
		held, waiter := b.SpinLock(name("try")), a.SpinLock(name("try"))
		if err := held.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := waiter.TryLock(ctx, lockactor.WithWait(50*time.Millisecond)); ok || err != nil {
			t.Fatalf("TryLock while the other Client holds = %v, %v; want false, nil", ok, err)
		}
		released := make(chan error, 1)
		time.AfterFunc(100*time.Millisecond, func() { released <- held.Unlock(ctx) })
		if ok, err := waiter.TryLock(ctx, lockactor.WithWait(5*time.Second)); !ok || err != nil {
			t.Fatalf("TryLock with a wait over the other Client's Unlock = %v, %v", ok, err)
		}
		if err := <-released; err != nil {
			t.Fatalf("the other Client's Unlock: %v", err)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})

	t.Run("WatchdogRenews", func(t *testing.T) {
		l := a.SpinLock(name("watchdog"))
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Lost():
			t.Fatal("lost while held past 3 watchdog timeouts")
		case <-time.After(3 * aclSpinWatchdog):
		}
		if ok, err := b.SpinLock(name("watchdog")).TryLock(ctx); ok || err != nil {
			t.Fatalf("another Client's TryLock during the renewed hold = %v, %v", ok, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after renewals: %v", err)
		}
	})

	t.Run("ForceUnlock", func(t *testing.T) {
		l := a.SpinLock(name("force"))
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := b.SpinLock(name("force")).ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock of a held lock = %v, %v; want true, nil", ok, err)
		}
		if ok, err := b.SpinLock(name("force")).ForceUnlock(ctx); ok || err != nil {
			t.Fatalf("ForceUnlock of a free lock = %v, %v; want false, nil", ok, err)
		}
		select {
		case <-l.Lost():
		case <-time.After(5 * aclSpinWatchdog):
			t.Fatal("the holder's Lost did not close after ForceUnlock")
		}
		if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
			t.Fatalf("Unlock after ForceUnlock = %v, want ErrNotHeld", err)
		}
	})

	t.Run("Contention", func(t *testing.T) {
		const workers, rounds = 2, 10
		var inside, most atomic.Int64
		var wg sync.WaitGroup
		for ci, c := range []*lockactor.Client{a, b} {
			for w := range workers {
				l := c.SpinLock(name("contend"))
				wg.Go(func() {
					for r := range rounds {
						if err := l.Lock(ctx); err != nil {
							t.Errorf("client %d worker %d round %d: Lock: %v", ci, w, r, err)
							return
						}
						n := inside.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						time.Sleep(500 * time.Microsecond)
						inside.Add(-1)
						if err := l.Unlock(ctx); err != nil {
							t.Errorf("client %d worker %d round %d: Unlock: %v", ci, w, r, err)
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
	})

	t.Run("LockWaiterGetsItAfterLease", func(t *testing.T) {
		// A Lock waiter of a Client whose user may subscribe hears no
		// release message from a holder that may not publish: it must
		// still get the lock, at its next timer (the holder's lease, here
		// the short watchdog), well before the bound.
		open := newClient(t, srv.Client(t))
		holder := a.SpinLock(name("mixed"))
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		waiter := open.Lock(name("mixed"))
		go func() { got <- waiter.Lock(ctx) }()
		time.Sleep(200 * time.Millisecond) // queued and subscribed
		if err := holder.Unlock(ctx); err != nil {
			t.Errorf("the SpinLock holder's Unlock: %v", err)
		}
		const bound = aclSpinWatchdog + 3*time.Second
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(bound):
			t.Fatalf("the Lock waiter did not get the lock within %v of the release", bound)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Close", func(t *testing.T) {
		c := newClient(t, asUser(t, srv, user), opts...)
		held := c.SpinLock(name("close"))
		if err := held.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		waiting := make(chan error, 1)
		go func() { waiting <- c.SpinLock(name("close")).Lock(ctx) }()
		time.Sleep(100 * time.Millisecond)
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		select {
		case err := <-waiting:
			if !errors.Is(err, lockactor.ErrClosed) {
				t.Fatalf("waiter after Close = %v, want ErrClosed", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("waiter still blocked after Close")
		}
		// The hold is left to its lease, as Close documents; the other
		// Client gets the lock once it runs out.
		other := b.SpinLock(name("close"))
		if ok, err := other.TryLock(ctx, lockactor.WithWait(aclSpinWatchdog+3*time.Second)); !ok || err != nil {
			t.Fatalf("TryLock after the closed Client's lease = %v, %v", ok, err)
		}
		if err := other.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	return logs
}

// startSpinACL starts a redis-server with the users of spinACLs (password
// "pw"); it skips the test on the embedded miniredis, which has no ACL.
func startSpinACL(t *testing.T) *redistest.Server {
	t.Helper()
	srv := redistest.Start(t)
	srv.NeedsReal(t, "ACL users")
	admin := srv.Client(t)
	for _, u := range spinACLs {
		args := []any{"acl", "setuser", u.user, "reset", "on", ">pw", "~*", "+@all"}
		for _, r := range strings.Fields(u.rules) {
			args = append(args, r)
		}
		if err := admin.Do(context.Background(), args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

// spinACLs are ACL users that may not use pub/sub as managed Redis services
// restrict it: no channel at all (resetchannels; "&none" in the issue only
// allows a channel literally named "none"), and every channel but without
// the PUBLISH and SPUBLISH commands.
var spinACLs = []struct{ user, rules string }{
	{"nochannels", "resetchannels"},
	{"nopublish", "&* -publish -spublish"},
}

// asUser is a go-redis client of srv authenticated as user.
func asUser(t *testing.T, srv *redistest.Server, user string) *redis.Client {
	return srv.ClientWith(t, func(o *redis.Options) { o.Username, o.Password = user, "pw" })
}
