package scripts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestFencedLockFloor runs fenced_lock.lua, plain and latched, from every
// state of the counter (absent, below, at and above the floor, below and
// above the server's clock) and of the hash (free, held by the caller,
// held by another owner): a grant's token is above the floor; a grant from
// zero holds is max(counter, floor) + 1, or the clock in microseconds when
// that is higher; a reentrant one reports a counter above the floor as it
// is and never reads the clock; and the counter never goes down and ends
// at the token granted.
func TestFencedLockFloor(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const (
		none  = -1      // no counter key
		clock = -3      // the token is the server's clock
		ahead = 1 << 52 // a counter or floor above the clock (which is about 1.8e15)
	)
	rows := []struct {
		name    string
		counter int64 // none: the key is absent
		holder  string
		floor   uint64
		fresh   string  // ARGV[4]: "1" a new hold, "0" a reentrant grant
		want    []int64 // the reply
		after   int64   // the counter afterwards
	}{
		{"free, no counter, no floor", none, "", 0, "1", []int64{1, clock}, clock},
		{"free, counter and floor below the clock", 10, "", 4, "1", []int64{1, clock}, clock},
		{"free, counter above the floor and the clock", ahead + 10, "", 4, "1", []int64{1, ahead + 11}, ahead + 11},
		{"free, counter at the floor", ahead + 10, "", ahead + 10, "1", []int64{1, ahead + 11}, ahead + 11},
		{"free, counter below the floor", 7, "", ahead + 10, "1", []int64{1, ahead + 11}, ahead + 11},
		{"free, no counter, a floor above the clock", none, "", ahead + 21, "1", []int64{1, ahead + 22}, ahead + 22},
		{"free, though the caller thought it reentrant", 10, "", 9, "0", []int64{1, clock}, clock},
		{"reentrant, counter above the floor", 10, "me", 9, "0", []int64{1, 10}, 10},
		{"reentrant, counter at the floor", 10, "me", 10, "0", []int64{1, 11}, 11},
		{"reentrant, counter below the floor", 7, "me", 9, "0", []int64{1, 10}, 10},
		{"reentrant, no counter", none, "me", 0, "0", []int64{1, 1}, 1},
		// The strict Sentinel torture at e3d51e8: a failover lost a
		// release, and the owner's next hold got the stale hold's token.
		{"a stale hold of the caller's field, a new hold asked", 10, "me", 4, "1", []int64{1, clock}, clock},
		{"held by another owner", 7, "other", 10, "1", []int64{0, -2}, 7}, // pttl checked apart
	}
	now := func() int64 {
		t.Helper()
		tm, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMicro()
	}
	for _, latched := range []bool{false, true} {
		for i, tt := range rows {
			t.Run(fmt.Sprintf("latched=%v/%s", latched, tt.name), func(t *testing.T) {
				name := fmt.Sprintf("{fenced-%v-%d}", latched, i)
				token := "redisson_lock_token:" + name
				if tt.counter != none {
					rdb.Set(ctx, token, tt.counter, 0)
				}
				if tt.holder != "" {
					rdb.HSet(ctx, name, tt.holder, 1)
					rdb.PExpire(ctx, name, time.Minute)
				}
				s, keys, args := FencedLock, []string{name, token}, []any{30000, "me", tt.floor, tt.fresh}
				if latched {
					s = Latched.FencedLock
					keys = append(keys, "lockactor_latch:"+name+":test:fenced")
					args = append(args, 1, 60_000)
				}
				before := now()
				got, err := s.Run(ctx, rdb, keys, args...).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				after, err := rdb.Get(ctx, token).Int64()
				if err != nil && err != redis.Nil {
					t.Fatal(err)
				}
				switch {
				case tt.want[1] == -2: // refused: the holder's PTTL
					if len(got) != 2 || got[0] != 0 || got[1] <= 0 || got[1] > 60_000 {
						t.Fatalf("reply %v, want {0, pttl}", got)
					}
				case tt.want[1] == clock:
					if len(got) != 2 || got[0] != 1 || got[1] < before || got[1] > now() {
						t.Fatalf("reply %v, want {1, the server's clock in µs} (%d at the call)", got, before)
					}
				case fmt.Sprint(got) != fmt.Sprint(tt.want):
					t.Fatalf("reply %v, want %v", got, tt.want)
				}
				if want := tt.after; (want == clock && after != got[1]) || (want != clock && after != want) {
					t.Fatalf("counter %d afterwards, want %d (reply %v)", after, want, got)
				}
				if tt.holder != "other" {
					if n, _ := rdb.HGet(ctx, name, "me").Int(); n != 1+map[string]int{"me": 1}[tt.holder] {
						t.Fatalf("hold count %d, want one more than before", n)
					}
				}
			})
		}
	}
}
