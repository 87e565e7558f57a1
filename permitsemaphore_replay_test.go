package lockactor_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

// A permit request sent more than once (its reply lost and settled from the
// latch, re-sent by go-redis on a new connection, or sent again by the
// runtime under a new latch sequence) takes or gives back one permit: the
// count plus the held permits in {name}:timeout always make the set count.

// permitState reads a permit semaphore as Redis holds it: the count, and the
// held permits' ids in hex.
func permitState(t *testing.T, rdb *redis.Client, name string) (count int, ids []string) {
	t.Helper()
	ctx := context.Background()
	v, err := rdb.Get(ctx, name).Int()
	if err != nil {
		t.Fatalf("GET %s: %v", name, err)
	}
	members, err := rdb.ZRange(ctx, redisio.PermitTimeouts(name), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		ids = append(ids, hex.EncodeToString([]byte(m)))
	}
	return v, ids
}

// evalshaCalls counts the scripts the server ran: a re-sent copy counts.
func evalshaCalls(t *testing.T, admin *redis.Client) int64 {
	t.Helper()
	for _, line := range strings.Split(admin.Info(context.Background(), "commandstats").Val(), "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

func TestPermitSemaphoreReplayedRequestsApplyOnce(t *testing.T) {
	const set = 3
	type fault func(t *testing.T, script *redis.Script, call func() error)
	tests := []struct {
		name string
		// client makes the Client's go-redis client; fault runs call with
		// the fault applied to its first run of script.
		client func(t *testing.T, srv *redistest.Server) (*redis.Client, fault)
	}{
		{"reply lost, settled from the latch", func(t *testing.T, srv *redistest.Server) (*redis.Client, fault) {
			rdb, hook := hooked(t, srv)
			return rdb, func(t *testing.T, script *redis.Script, call func() error) {
				r := hook.once(t, rdb, script, faultRule{lose: true})
				if err := call(); err != nil {
					t.Fatalf("call whose reply was lost = %v, want the settled outcome", err)
				}
				if n := hook.count(r); n != 1 {
					t.Fatalf("the fault hit %d scripts, want 1", n)
				}
			}
		}},
		{"re-sent by go-redis on a new connection", func(t *testing.T, srv *redistest.Server) (*redis.Client, fault) {
			srv.NeedsReal(t, "INFO commandstats, to count the scripts the server ran")
			proxy := redistest.NewProxy(t, srv.Addr())
			admin := srv.Client(t)
			return proxy.Client(t), func(t *testing.T, script *redis.Script, call func() error) {
				if err := script.Load(context.Background(), admin).Err(); err != nil {
					t.Fatal(err)
				}
				before := evalshaCalls(t, admin)
				cut := proxy.CutAfter(func(args []string) bool {
					return len(args) > 1 && args[0] == "EVALSHA" && args[1] == script.Hash()
				})
				if err := call(); err != nil {
					t.Fatalf("call re-sent after a cut = %v", err)
				}
				<-cut
				if n := evalshaCalls(t, admin) - before; n < 2 {
					t.Fatalf("the server ran %d script(s); the cut should have made go-redis send it again", n)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client(t)
			ctx := ctxFor(t, 20*time.Second)
			rdb, withFault := tc.client(t, srv)
			s := newClient(t, rdb).PermitSemaphore("preplay")
			if ok, err := s.TrySetPermits(ctx, set); !ok || err != nil {
				t.Fatalf("TrySetPermits = %v, %v", ok, err)
			}
			var id string
			withFault(t, scripts.Latched.PermitAcquire, func() (err error) {
				id, err = s.Acquire(ctx, time.Minute)
				return err
			})
			count, ids := permitState(t, admin, "preplay")
			if count != set-1 || len(ids) != 1 || ids[0] != id {
				t.Fatalf("after one Acquire sent twice: count %d, held %v; want %d and exactly the id returned, %s", count, ids, set-1, id)
			}
			if n, err := s.AvailablePermits(ctx); n != set-1 || err != nil {
				t.Fatalf("AvailablePermits = %d, %v; want %d", n, err, set-1)
			}
			// The Release sent twice says given back (not ErrNotHeld from the
			// copy that found it gone) and gives back one permit.
			withFault(t, scripts.Latched.PermitRelease, func() error { return s.Release(ctx, id) })
			if count, ids := permitState(t, admin, "preplay"); count != set || len(ids) != 0 {
				t.Fatalf("after one Release sent twice: count %d, held %v; want %d and none", count, ids, set)
			}
			if err := s.Release(ctx, id); !errors.Is(err, lockactor.ErrNotHeld) {
				t.Fatalf("a second Release of the id = %v, want ErrNotHeld", err)
			}
		})
	}
}

// The scripts themselves, sent again under a new latch sequence with the
// same permit id, as the runtime sends a request whose first copy's
// outcome it could not learn: the acquire takes nothing more and says
// taken; the release gives back nothing more and says not held.
func TestPermitScriptsByKnownID(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxFor(t, 10*time.Second)
	const name, set = "pknown", 2
	keys := []string{name, redisio.PermitTimeouts(name), redisio.SemaphoreChannel(name), "lockactor_latch:{pknown}:test:permit"}
	rdb.Set(ctx, name, set, 0)
	member, err := redisio.PermitMember("00112233445566778899aabbccddeeff")
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(seq int) []any {
		t.Helper()
		v, err := scripts.Latched.PermitAcquire.Run(ctx, rdb, keys, member, 60000, "publish", seq, 60000).Slice()
		if err != nil {
			t.Fatalf("acquire seq %d: %v", seq, err)
		}
		return v
	}
	release := func(seq int) int64 {
		t.Helper()
		n, err := scripts.Latched.PermitRelease.Run(ctx, rdb, keys, member, "publish", seq, 60000).Int64()
		if err != nil {
			t.Fatalf("release seq %d: %v", seq, err)
		}
		return n
	}
	for seq := 1; seq <= 3; seq++ { // 1, its replay (same seq below), and two new sequences
		if v := acquire(seq); v[0] != int64(1) {
			t.Fatalf("acquire seq %d = %v, want taken", seq, v)
		}
		if seq == 1 {
			if v := acquire(1); v[0] != int64(1) {
				t.Fatalf("replay of seq 1 = %v, want taken", v)
			}
		}
		if count, ids := permitState(t, rdb, name); count != set-1 || len(ids) != 1 {
			t.Fatalf("after acquire seq %d: count %d, %d held; want %d and 1", seq, count, len(ids), set-1)
		}
	}
	if n := release(4); n != 1 {
		t.Fatalf("release = %d, want 1", n)
	}
	if n := release(4); n != 1 {
		t.Fatalf("replayed release = %d, want its recorded 1", n)
	}
	if n := release(5); n != 0 {
		t.Fatalf("release under a new sequence = %d, want 0 (not held)", n)
	}
	if count, ids := permitState(t, rdb, name); count != set || len(ids) != 0 {
		t.Fatalf("after the releases: count %d, %d held; want %d and none", count, len(ids), set)
	}
}
