package redisio

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Script arguments, built with as few allocations as the hot path allows.
// go-redis takes a command's arguments as []any, and converting a string,
// or an integer above 255, to an interface allocates. redis.Script's
// EvalSha converts the hash and every key again on each call; the batcher
// instead builds each call's EVALSHA arguments once, in one slice, from
// values converted ahead where they repeat: a script's hash (shaOf), a
// lock's name, latch and channel (Keys, one per actor), and lease and latch
// lifetimes in ms (msArg). What the server receives is the same.

// Keys holds a lock name's keys as go-redis sends them, converted once per
// actor instead of on every call. An actor's ledger builds it (NewKeys) and
// hands it to every request in Op.Keys.
type Keys struct {
	Name, Latch          string
	name, latch, channel any // Name, Latch and LockChannel(Name)
}

// NewKeys returns the Keys of the lock name whose requests use latch.
func NewKeys(name, latch string) *Keys {
	return &Keys{Name: name, Latch: latch, name: name, latch: latch, channel: LockChannel(name)}
}

// keysFor is op.Keys when they are name's and op's, else name's built now.
func (op Op) keysFor(name string) *Keys {
	if k := op.Keys; k != nil && k.Name == name && k.Latch == op.Latch {
		return k
	}
	return NewKeys(name, op.Latch)
}

// shas holds each script's hash as an interface (*redis.Script -> any).
var shas sync.Map

// shaOf is s's hash, converted once.
func shaOf(s *redis.Script) any {
	if v, ok := shas.Load(s); ok {
		return v
	}
	v, _ := shas.LoadOrStore(s, any(s.Hash()))
	return v
}

// msMemo is one duration rendered as whole milliseconds.
type msMemo struct {
	n int64
	v any // strconv.FormatInt(n, 10)
}

// msCache remembers the last durations msArg rendered: leases and latch
// lifetimes repeat from call to call (a Client's watchdog, its LatchKeep).
// Slots are picked by a multiplicative hash: round values such as 30000 and
// 3600000 share their low bits.
var msCache [64]atomic.Pointer[msMemo]

// msArg is ms(d) as an interface, from msCache when it was rendered lately.
func msArg(d time.Duration) any {
	n := max(d.Milliseconds(), 1)
	slot := &msCache[(uint64(n)*0x9e3779b97f4a7c15)>>58]
	if m := slot.Load(); m != nil && m.n == n {
		return m.v
	}
	m := &msMemo{n: n, v: strconv.FormatInt(n, 10)}
	slot.Store(m)
	return m.v
}

// evalArgs builds EVALSHA's arguments for s with keys and args.
func evalArgs(s *redis.Script, keys []string, args []any) []any {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "evalsha", shaOf(s), len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	return append(argv, args...)
}

// newCall is a call of s with keys and args; then takes its reply (nil for
// a post).
func newCall(ctx context.Context, s *redis.Script, keys []string, args []any, then func(Reply)) *batchCall {
	return &batchCall{ctx: ctx, script: s, key: keys[0], argv: evalArgs(s, keys, args), then: then}
}

// processor is where a command goes: a client, or a pipeline.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// evalSha queues or runs c as EVALSHA on p.
func (c *batchCall) evalSha(ctx context.Context, p processor) *redis.Cmd {
	cmd := redis.NewCmd(ctx, c.argv...)
	cmd.SetFirstKeyPos(3)
	_ = p.Process(ctx, cmd)
	return cmd
}

// eval queues or runs c as EVAL on p, which loads its script: for a server
// that answered NOSCRIPT. It is rare; the keys and arguments are taken back
// out of c.argv.
func (c *batchCall) eval(ctx context.Context, p redis.Scripter) *redis.Cmd {
	n := c.argv[2].(int)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = c.argv[3+i].(string)
	}
	return c.script.Eval(ctx, p, keys, c.argv[3+n:]...)
}

// run runs c on rdb at once: EVALSHA, then EVAL if the server answers
// NOSCRIPT (as redis.Script.Run does).
func (c *batchCall) run(ctx context.Context, rdb redis.UniversalClient) *redis.Cmd {
	cmd := c.evalSha(ctx, rdb)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return c.eval(ctx, rdb)
	}
	return cmd
}
