package lockactor_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestSpinPublishOption checks, on a server that allows pub/sub, what each
// setting of WithSpinPublish sends on the lock's channel: the default
// publishes on a SpinLock's release and ForceUnlock, so a Lock waiter of
// another Client wakes at once (the holder's lease is the 30 s default:
// only the message can wake it that soon); WithSpinPublish(false) sends
// nothing, and the Lock waiter takes the lock at its next retry, within
// the holder's lease (1 s here) and a margin for a shared machine.
func TestSpinPublishOption(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, tc := range []struct {
		name     string
		opts     []lockactor.Option
		publish  bool
		wakeIn   time.Duration
		watchdog time.Duration
	}{
		{"default publishes", nil, true, 2 * time.Second, 30 * time.Second},
		{"WithSpinPublish(false) is quiet", []lockactor.Option{lockactor.WithSpinPublish(false)}, false, time.Second + 3*time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			name := "spin-publish-" + strconv.FormatBool(tc.publish)
			c := newClient(t, srv.Client(t), append([]lockactor.Option{lockactor.WithWatchdogTimeout(tc.watchdog)}, tc.opts...)...)
			sub := admin.Subscribe(ctx, "redisson_lock__channel:{"+name+"}")
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			messages := sub.Channel()
			expectMessage := func(what string) {
				t.Helper()
				wait := 300 * time.Millisecond
				if tc.publish {
					wait = 3 * time.Second
				}
				select {
				case m := <-messages:
					if !tc.publish {
						t.Fatalf("%s published %q", what, m.Payload)
					}
				case <-time.After(wait):
					if tc.publish {
						t.Fatalf("%s published nothing", what)
					}
				}
			}

			l := c.SpinLock(name)
			for range 2 { // reentrant: the first Unlock frees nothing
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			expectMessage("Unlock")
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, err := c.SpinLock(name).ForceUnlock(ctx); !ok || err != nil {
				t.Fatalf("ForceUnlock = %v, %v", ok, err)
			}
			expectMessage("ForceUnlock")
			select {
			case m := <-messages:
				t.Fatalf("an extra message %q", m.Payload)
			default:
			}

			holder := c.SpinLock(name + "-wake")
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			waiter := newClient(t, srv.Client(t)).Lock(name + "-wake")
			woke := wakeAfter(t, func() error { return waiter.Lock(ctx) }, func() error { return holder.Unlock(ctx) })
			t.Logf("the Lock waiter took the lock %v after the SpinLock's Unlock", woke)
			if woke > tc.wakeIn {
				t.Fatalf("the Lock waiter took the lock %v after the release, want within %v", woke, tc.wakeIn)
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
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
