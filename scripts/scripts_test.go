package scripts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockactor/lockactor/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSnippetSplice: each host script carries its snippet's code once,
// without the snippet's header and in place of the marker line, and sets
// the local the snippet reads; a host without exactly one marker line is
// refused.
func TestSnippetSplice(t *testing.T) {
	for _, sn := range []struct {
		snippet, marker string
		starts, ends    string // the code's first and last lines
		sets            string // what every host must set before the marker
		hosts           map[string]string
	}{
		{fairPurgeLua, fairPurgeMarker, "while true do\n", "\nend\n", "local now = tonumber(ARGV[",
			map[string]string{"fair_lock.lua": fairLockSrc, "fair_unlock.lua": fairUnlockSrc,
				"fair_cancel.lua": fairCancelSrc, "fair_force_unlock.lua": fairForceUnlockSrc}},
		{permitReclaimLua, permitReclaimMarker, "redis.replicate_commands()\n", "\nend\n", "local pub = ARGV[",
			map[string]string{"permit_acquire.lua": permitAcquireSrc, "permit_release.lua": permitReleaseSrc,
				"permit_update.lua": permitUpdateSrc, "permit_available.lua": permitAvailableSrc}},
		{publishLua, publishMarker, "local function publish(", "\nend\n", "",
			map[string]string{"unlock.lua": unlockSrc, "force_unlock.lua": forceUnlockSrc, "fair_unlock.lua": fairUnlockSrc,
				"fair_cancel.lua": fairCancelSrc, "fair_force_unlock.lua": fairForceUnlockSrc, "read_unlock.lua": readUnlockSrc,
				"write_unlock.lua": writeUnlockSrc, "rw_force_unlock.lua": rwForceUnlockSrc, "semaphore_release.lua": semaphoreReleaseSrc,
				"semaphore_set.lua": semaphoreSetSrc, "permit_acquire.lua": permitAcquireSrc, "permit_release.lua": permitReleaseSrc,
				"permit_update.lua": permitUpdateSrc, "permit_available.lua": permitAvailableSrc,
				"countdown_set.lua": countDownSetSrc, "countdown_down.lua": countDownDownSrc}},
	} {
		code := snippetCode(sn.snippet)
		if !strings.HasPrefix(code, sn.starts) || !strings.HasSuffix(code, sn.ends) {
			t.Fatalf("%s's code does not run from %q to %q:\n%s", sn.marker, sn.starts, sn.ends, code)
		}
		for line := range strings.Lines(code) {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				t.Fatalf("%s's code still has a comment line %q", sn.marker, line)
			}
		}
		for name, src := range sn.hosts {
			t.Run(name, func(t *testing.T) {
				if n := strings.Count(src, code); n != 1 {
					t.Errorf("the snippet is in it %d times, want 1", n)
				}
				if strings.Contains(src, sn.marker) {
					t.Error("the marker is still in it")
				}
				if !strings.Contains(src, sn.sets) {
					t.Errorf("it does not set %q, which the snippet reads", sn.sets)
				}
			})
		}
	}
	code := snippetCode(fairPurgeLua)
	for _, tt := range []struct {
		host, want string // want "": it panics
	}{
		{"a\n--[[fair_purge]]\nb\n", "a\n" + code + "b\n"},
		{"a\n--[[fair_purge]]", "a\n" + code},
		{"return 1\n", ""},
		{"a --[[fair_purge]]\n", ""},
		{"a\n--[[fair_purge]]\n--[[fair_purge]]\n", ""},
	} {
		func() {
			defer func() {
				if r := recover(); (r != nil) != (tt.want == "") {
					t.Errorf("withFairPurge(%q) panicked: %v; want a panic: %v", tt.host, r, tt.want == "")
				}
			}()
			if got := withFairPurge(tt.host); got != tt.want {
				t.Errorf("withFairPurge(%q) = %q, want %q", tt.host, got, tt.want)
			}
		}()
	}
}

// TestFairScriptsPurge runs each fair script, plain and latched where it has
// a latched form, on a queue whose head is a waiter past its deadline and
// one without a deadline: both go, the waiters behind them stay.
func TestFairScriptsPurge(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const lease, w = "30000", "5000"
	tests := []struct {
		name    string
		script  *redis.Script
		latched bool // KEYS and ARGV take the latch's after the script's
		keys    int  // how many of hash, queue, deadlines, channel it takes
		argv    func(now string) []any
		wantNil bool // the script answers nil
	}{
		{"fair_lock", FairLock, false, 4, func(now string) []any { return []any{lease, "x", w, now, "1"} }, false},
		{"fair_lock latched", Latched.FairLock, true, 4, func(now string) []any { return []any{lease, "x", w, now, "1"} }, false},
		{"fair_unlock", FairUnlock, false, 4, func(now string) []any { return []any{"0", lease, "x", now, "publish"} }, true},
		{"fair_unlock latched", Latched.FairUnlock, true, 4, func(now string) []any { return []any{"0", lease, "x", now, "publish"} }, false},
		{"fair_cancel", FairCancel, false, 4, func(now string) []any { return []any{"x", w, "0", "publish", now} }, false},
		{"fair_force_unlock", FairForceUnlock, false, 4, func(now string) []any { return []any{"0", now, "publish"} }, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "{purge-" + strconv.Itoa(i) + "}"
			all := []string{name, "redisson_lock_queue:" + name, "redisson_lock_timeout:" + name, "redisson_lock__channel:" + name}
			queue, deadlines := all[1], all[2]
			now := time.Now().UnixMilli()
			setup := rdb.TxPipeline()
			setup.HSet(ctx, name, "holder", 1)
			setup.PExpire(ctx, name, time.Minute)
			setup.RPush(ctx, queue, "expired", "undated", "next", "last")
			setup.ZAdd(ctx, deadlines,
				redis.Z{Member: "expired", Score: float64(now - 1)},
				redis.Z{Member: "next", Score: float64(now + 60_000)},
				redis.Z{Member: "last", Score: float64(now + 120_000)})
			if _, err := setup.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			keys, args := all[:tt.keys], tt.argv(strconv.FormatInt(now, 10))
			if tt.latched {
				keys = append(keys, "lockactor_latch:"+name+":test:fair")
				args = append(args, 1, 60_000)
			}
			err := tt.script.Run(ctx, rdb, keys, args...).Err()
			if tt.wantNil && !errors.Is(err, redis.Nil) || !tt.wantNil && err != nil {
				t.Fatalf("script: %v (want nil reply: %v)", err, tt.wantNil)
			}
			got, err := rdb.LRange(ctx, queue, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != "next,last" {
				t.Errorf("queue = %q, want [next last]", got)
			}
			dated, err := rdb.ZRange(ctx, deadlines, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(dated, ",") != "next,last" {
				t.Errorf("deadlines = %q, want [next last]", dated)
			}
		})
	}
}

// TestPublishOnlyThroughSnippet: no script publishes with redis.call, whose
// error on a refused publish would end the script after its writes (see
// publish.lua); every publish command goes through publish().
func TestPublishOnlyThroughSnippet(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	direct := regexp.MustCompile(`redis\.call\((ARGV\[\d+\]|pub|publish),`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if direct.MatchString(line) {
				t.Errorf("%s:%d publishes with redis.call: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
