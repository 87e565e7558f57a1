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
// state of the counter (absent, below, at and above the floor) and of the
// hash (free, held by the caller, held by another owner): a grant's token
// is above the floor, a grant from zero holds is max(counter, floor) + 1, a
// reentrant one reports a counter above the floor as it is, and the
// counter never goes down and ends at the token granted.
func TestFencedLockFloor(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const none = -1 // no counter key
	rows := []struct {
		name    string
		counter int64 // none: the key is absent
		holder  string
		floor   uint64
		want    []int64 // the reply
		after   int64   // the counter afterwards
	}{
		{"free, no counter, no floor", none, "", 0, []int64{1, 1}, 1},
		{"free, counter above the floor", 10, "", 4, []int64{1, 11}, 11},
		{"free, counter at the floor", 10, "", 10, []int64{1, 11}, 11},
		{"free, counter below the floor", 7, "", 10, []int64{1, 11}, 11},
		{"free, no counter, a floor", none, "", 21, []int64{1, 22}, 22},
		{"reentrant, counter above the floor", 10, "me", 9, []int64{1, 10}, 10},
		{"reentrant, counter at the floor", 10, "me", 10, []int64{1, 11}, 11},
		{"reentrant, counter below the floor", 7, "me", 9, []int64{1, 10}, 10},
		{"reentrant, no counter", none, "me", 0, []int64{1, 1}, 1},
		{"held by another owner", 7, "other", 10, []int64{0, -2}, 7}, // pttl checked apart
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
				s, keys, args := FencedLock, []string{name, token}, []any{30000, "me", tt.floor}
				if latched {
					s = Latched.FencedLock
					keys = append(keys, "lockactor_latch:"+name+":test:fenced")
					args = append(args, 1, 60_000)
				}
				got, err := s.Run(ctx, rdb, keys, args...).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				if tt.want[1] == -2 { // refused: the holder's PTTL
					if len(got) != 2 || got[0] != 0 || got[1] <= 0 || got[1] > 60_000 {
						t.Fatalf("reply %v, want {0, pttl}", got)
					}
				} else if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Fatalf("reply %v, want %v", got, tt.want)
				}
				after, err := rdb.Get(ctx, token).Int64()
				if err != nil && err != redis.Nil {
					t.Fatal(err)
				}
				if after != tt.after {
					t.Fatalf("counter %d afterwards, want %d", after, tt.after)
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
