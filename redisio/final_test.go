package redisio

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

// The errors a script meets when its name holds another kind's data are
// final; those of a server that cannot serve for now, or of a connection,
// are not. The first rows are real Redis replies, so that a server that
// words them differently fails here.
func TestFinal(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb.HSet(ctx, "a-hash", "owner", 1)
	rdb.Set(ctx, "a-word", "not-a-count", 0)
	rdb.Set(ctx, "a-big-count", "9223372036854775807", 0)
	script := func(src string, keys ...string) error { return rdb.Eval(ctx, src, keys).Err() }
	tests := []struct {
		name  string
		err   error
		final bool
	}{
		{"INCRBY on a lock's hash", script("return redis.call('incrby', KEYS[1], 1)", "a-hash"), true},
		{"INCRBY on a word", script("return redis.call('incrby', KEYS[1], 1)", "a-word"), true},
		{"INCRBY past the largest count", script("return redis.call('incrby', KEYS[1], 1)", "a-big-count"), true},
		{"a script that reads what it cannot use", script("return tonumber(redis.call('get', KEYS[1])) + 1", "a-word"), true},
		{"no error", nil, false},
		{"a broken connection", errors.New("read tcp 127.0.0.1:6379: connection reset by peer"), false},
		{"a server busy with a script", testRedisError("BUSY Redis is busy running a script"), false},
		{"a server loading", testRedisError("LOADING Redis is loading the dataset in memory"), false},
		{"out of memory", testRedisError("OOM command not allowed when used memory > 'maxmemory'."), false},
		{"a replica after a failover", testRedisError("READONLY You can't write against a read only replica."), false},
		{"an ACL", testRedisError("NOPERM this user has no permissions to run the 'evalsha' command"), false},
		{"too many clients", testRedisError("ERR max number of clients reached"), false},
		// Redis 6 wraps what a script's command met in the script's error:
		// the wrapped reply decides.
		{"Redis 6: a script's write on a replica after a failover",
			testRedisError("ERR Error running script (call to f_8ea4): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica."), false},
		{"Redis 6: a script's write out of memory",
			testRedisError("ERR Error running script (call to f_8ea4): @user_script:1: @user_script: 1: -OOM command not allowed when used memory > 'maxmemory'."), false},
		{"Redis 6: a script's INCRBY on a lock's hash",
			testRedisError("ERR Error running script (call to f_8ea4): @user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{"Redis 6: a script's bug",
			testRedisError("ERR Error running script (call to f_8ea4): @user_script:5: user_script:5: attempt to compare nil with number"), true},
		// The in-process fallback (miniredis) reports a script's errors as
		// compile errors.
		{"the fallback: a script's INCRBY on a lock's hash",
			testRedisError("ERR Error compiling script (new function): :73: WRONGTYPE Operation against a key holding the wrong kind of value stack traceback: [G]: in function 'call'"), true},
		{"the fallback: a script's bug",
			testRedisError("ERR Error compiling script (new function): :1: cannot perform add operation between nil and number stack traceback: :1: in main chunk"), true},
	}
	for _, tc := range tests {
		if tc.name != "no error" && tc.err == nil {
			t.Fatalf("%s: the script did not fail", tc.name)
		}
		if got := Final(tc.err); got != tc.final {
			t.Errorf("%s: Final(%v) = %v, want %v", tc.name, tc.err, got, tc.final)
		}
	}
}

// testRedisError is an error reply as go-redis returns it.
type testRedisError string

func (e testRedisError) Error() string { return string(e) }
func (testRedisError) RedisError()     {}
