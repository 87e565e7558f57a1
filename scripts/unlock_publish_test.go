package scripts

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestUnlockPublishRefused runs unlock.lua (latched, as the actors send it)
// and force_unlock.lua as users that may publish and as users an ACL denies
// the channel or the PUBLISH command, with the publish command and with
// none (""). A release always stands and always answers: 1 when the
// message went out, else 4 (unlock) or 2 (force unlock), never an error
// after the DEL. The latch records that answer, so a copy of the same
// request replays it rather than finding nothing held. With no command the
// server sees no publish at all: its ACL LOG stays empty.
func TestUnlockPublishRefused(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	users := []struct{ name, rules string }{
		{"default", ""},
		{"nochannels", "resetchannels"},
		{"nopublish", "&* -publish -spublish"},
	}
	for _, u := range users[1:] {
		if srv.Embedded() {
			break // miniredis has no ACL: only the default user runs
		}
		args := []any{"acl", "setuser", u.name, "reset", "on", ">pw", "~*", "+@all"}
		for _, r := range strings.Fields(u.rules) {
			args = append(args, r)
		}
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range users {
		for _, pub := range []string{"publish", ""} {
			t.Run(u.name+"/"+strconv.Quote(pub), func(t *testing.T) {
				if u.name != "default" && srv.Embedded() {
					srv.NeedsReal(t, "ACL users")
				}
				rdb := admin
				if u.name != "default" {
					rdb = srv.ClientWith(t, func(o *redis.Options) { o.Username, o.Password = u.name, "pw" })
				}
				told := u.name == "default" && pub != ""
				name := "{pub-" + u.name + "-" + strconv.Itoa(len(pub)) + "}"
				channel := "redisson_lock__channel:" + name
				latch := "lockactor_latch:" + name + ":test:spin"
				sub := admin.Subscribe(ctx, channel)
				defer sub.Close()
				if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
					t.Fatal(err)
				}
				if !srv.Embedded() {
					if err := admin.Do(ctx, "acl", "log", "reset").Err(); err != nil {
						t.Fatal(err)
					}
				}

				if err := admin.HSet(ctx, name, "owner", 1).Err(); err != nil {
					t.Fatal(err)
				}
				want, wantForce := int64(4), int64(2)
				if told {
					want, wantForce = 1, 1
				}
				unlock := func() (int64, error) {
					return Latched.Unlock.Run(ctx, rdb, []string{name, channel, latch},
						"0", "30000", "owner", pub, "", "", 7, 60_000).Int64()
				}
				if n, err := unlock(); n != want || err != nil {
					t.Fatalf("unlock.lua = %d, %v; want %d", n, err, want)
				}
				if n := admin.Exists(ctx, name).Val(); n != 0 {
					t.Fatal("the lock is still there after its release")
				}
				if rec := admin.Get(ctx, latch).Val(); rec != "7:i"+strconv.FormatInt(want, 10) {
					t.Fatalf("latch record %q, want the release's reply", rec)
				}
				if n, err := unlock(); n != want || err != nil {
					t.Fatalf("the same request again = %d, %v; want its reply replayed, %d", n, err, want)
				}
				heard(t, sub, told)

				if err := admin.HSet(ctx, name, "other", 1).Err(); err != nil {
					t.Fatal(err)
				}
				force := func() (int64, error) {
					return ForceUnlock.Run(ctx, rdb, []string{name, channel}, "0", pub).Int64()
				}
				if n, err := force(); n != wantForce || err != nil {
					t.Fatalf("force_unlock.lua = %d, %v; want %d", n, err, wantForce)
				}
				if n, err := force(); n != 0 || err != nil {
					t.Fatalf("force_unlock.lua with no lock = %d, %v; want 0", n, err)
				}
				heard(t, sub, told)

				if srv.Embedded() {
					return
				}
				entries, err := admin.Do(ctx, "acl", "log").Slice()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case pub == "" && len(entries) != 0:
					t.Fatalf("ACL LOG has %d entries with no publish command, want none: %v", len(entries), entries)
				case pub != "" && !told && len(entries) == 0:
					t.Fatal("ACL LOG is empty: the server did not refuse the publish, so the test tests nothing")
				}
			})
		}
	}
}

// heard checks whether one release message came on sub, and no other.
func heard(t *testing.T, sub *redis.PubSub, want bool) {
	t.Helper()
	ch := sub.Channel()
	if want {
		select {
		case m := <-ch:
			if m.Payload != "0" {
				t.Fatalf("message %q, want 0", m.Payload)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no release message")
		}
	}
	select {
	case m := <-ch:
		t.Fatalf("message %q, want none", m.Payload)
	case <-time.After(100 * time.Millisecond):
	}
}
