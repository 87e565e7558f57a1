package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/delayline"
	"github.com/lockactor/lockactor/scripts"
)

// Injected errors. Neither starts with NOSCRIPT, so go-redis's script
// fallback does not mistake them; both come from a hook outside go-redis's
// retry loop, so go-redis does not retry them either.
var (
	ErrRefused   = errors.New("torture: command refused by the fault hook (never sent)")
	ErrReplyLost = errors.New("torture: reply lost by the fault hook (the command ran)")
)

// serverRefusal is an error reply of a server that did not run the command
// and may run it later (see refusals).
type serverRefusal string

func (e serverRefusal) Error() string { return string(e) }

// RedisError makes it a server's reply to go-redis and the library (a
// redis.Error): the command surely did not run.
func (serverRefusal) RedisError() {}

// refusals are what a FaultBlock window answers, one per window: the
// hook's own ErrRefused (the library cannot tell whether the command ran),
// or a reply a real server sends for a command it did not run while it is
// read-only after a failover, out of memory, busy or loading, as Redis 7
// words it and as Redis 6 wraps it in a script's error. Whatever the words,
// a release so refused must be retried, never dropped as refused for good.
var refusals = []error{
	ErrRefused,
	serverRefusal("READONLY You can't write against a read only replica."),
	serverRefusal("ERR Error running script (call to f_0): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica."),
	serverRefusal("OOM command not allowed when used memory > 'maxmemory'."),
	serverRefusal("ERR Error running script (call to f_0): @user_script:1: @user_script: 1: -OOM command not allowed when used memory > 'maxmemory'."),
	serverRefusal("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."),
	serverRefusal("LOADING Redis is loading the dataset in memory"),
}

// refusalOf is the refusal of block window p (drawn from its seed).
func refusalOf(p Planned) error {
	return refusals[rand.New(rand.NewPCG(p.Seed, 4)).IntN(len(refusals))]
}

// Effect is what the hook did to one command.
type Effect uint8

// The hook's effects.
const (
	EffectNone Effect = iota
	EffectRefuse
	EffectLoseReply
	EffectDelay
	EffectLateReply // the command runs; its reply comes back late
	EffectBlock     // refused by a block window (FaultBlock)
	numEffects
)

var effectNames = [numEffects]string{"none", "refuse", "lose-reply", "delay", "late-reply", "block"}

// String names the effect.
func (e Effect) String() string { return effectNames[e] }

// Hook is the redis.Hook on one Client's go-redis client: it injects the
// shared Faults and reports watchdog renewals it sees to OnRenew.
type Hook struct {
	Server  string // "A" or "B"
	Client  int    // index among the server's Clients
	Name    string // "A1", ...
	Faults  *Faults
	OnRenew func(Renewal)
	// OnRenewReply, if not nil, receives every renewal the server answered
	// 1 with what the WAIT sent with it counted (see RenewReply).
	OnRenewReply func(RenewReply)
	// Sent, if not nil, counts the grant and renewal scripts that went out
	// with and without a WAIT.
	Sent *SyncTally
	// Noted, if not nil, counts the releases sent with a note for a
	// foreign waiter (unlock.lua with a note channel, ARGV[5]).
	Noted *atomic.Int64
}

var _ redis.Hook = (*Hook)(nil)

// The renewal scripts' SHA1s: EVALSHA names them, EVAL (after NOSCRIPT)
// carries their source.
var (
	renewSHA   = scripts.Renew.Hash()
	rwRenewSHA = scripts.RWRenew.Hash()
	unlockSHA  = scripts.Latched.Unlock.Hash()
)

// DialHook wraps every connection the Client dials so that, once it turns
// out to carry subscriptions (its first SUBSCRIBE or SSUBSCRIBE), what it
// reads runs through a delay line a FaultSubDelay window sets.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil || h.Faults == nil {
			return conn, err
		}
		return delayline.OnSubscribe(conn, func() time.Duration { return h.Faults.subDelay(h.Server, h.Client) }), nil
	}
}

// ProcessHook observes and maybe faults one command.
func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		cmds := []redis.Cmder{cmd}
		return h.fault(cmds, func() error { return next(ctx, cmd) })
	}
}

// ProcessPipelineHook observes every command of a pipeline and maybe faults
// the whole pipeline (the watchdog's batched renewals travel this way).
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := h.fault(cmds, func() error { return next(ctx, cmds) })
		h.Sent.infoOutcome(cmds, err)
		return err
	}
}

// fault observes cmds, picks what the active windows do to them (a block
// window first, then a hook window's draw) and sends them with send, or
// not, accordingly.
func (h *Hook) fault(cmds []redis.Cmder, send func() error) error {
	h.countNoted(cmds)
	renewals := h.observe(cmds)
	h.Sent.count(cmds)
	if d := h.Faults.linkDelay(h.Server, h.Client); d > 0 {
		time.Sleep(d) // a slow link: the command goes out late
	}
	e, d := h.Faults.blocks(h.Server, h.Client, cmds), time.Duration(0)
	if e == EffectNone {
		if d = h.Faults.lateReply(h.Server, cmds); d > 0 {
			e = EffectLateReply
		}
	}
	if e == EffectNone {
		e, d = h.Faults.draw(h.Server, h.Client)
	}
	fail := func(err error) error {
		for _, cmd := range cmds {
			cmd.SetErr(err)
		}
		return err
	}
	if e != EffectRefuse && e != EffectBlock {
		h.Faults.noteClashSends(h.Server, cmds)
	}
	switch e {
	case EffectRefuse:
		return fail(ErrRefused)
	case EffectBlock:
		return fail(h.Faults.blockRefusal())
	case EffectLoseReply:
		_ = send()
		h.Faults.ran(h.Server, cmds, true)
		h.Faults.withhold(h.Server, h.Name, cmds)
		return fail(ErrReplyLost)
	case EffectDelay:
		time.Sleep(d)
	case EffectLateReply:
		err := send()
		h.Faults.ran(h.Server, cmds, true)
		h.replied(cmds, renewals)
		time.Sleep(d)
		return err
	}
	err := send()
	h.Faults.ran(h.Server, cmds, false)
	h.replied(cmds, renewals)
	return err
}

// observe reports the renewal script calls among cmds to OnRenew and
// returns them by index in cmds.
func (h *Hook) observe(cmds []redis.Cmder) map[int]Renewal {
	if h.OnRenew == nil && h.OnRenewReply == nil {
		return nil
	}
	var out map[int]Renewal
	for i, cmd := range cmds {
		r, ok := ParseRenewal(cmd.Args())
		if !ok {
			continue
		}
		r.T, r.Client, r.Res = time.Now(), h.Name, h.Server+"/"+r.Res
		if h.OnRenew != nil {
			h.OnRenew(r)
		}
		if out == nil {
			out = map[int]Renewal{}
		}
		out[i] = r
	}
	return out
}

// countNoted counts the noted releases among cmds (see Noted).
func (h *Hook) countNoted(cmds []redis.Cmder) {
	if h.Noted == nil {
		return
	}
	for _, cmd := range cmds {
		args := cmd.Args()
		if sha, ok := scriptSHA(args); ok && sha == unlockSHA {
			if note, ok := scriptArgString(args, 5); ok && note != "" {
				h.Noted.Add(1)
			}
		}
	}
}

// ParseRenewal recognises `EVALSHA <sha> <numkeys> <key...> <arg...>` (or
// EVAL with the script's source) of renew.lua or rw_renew.lua and returns
// its KEYS[1] (in Res) and ARGV[2], the owner's field.
func ParseRenewal(args []any) (Renewal, bool) {
	sha, ok := scriptSHA(args)
	if !ok || len(args) < 3 || (sha != renewSHA && sha != rwRenewSHA) {
		return Renewal{}, false
	}
	var numKeys int
	if _, err := fmt.Sscan(fmt.Sprint(args[2]), &numKeys); err != nil || numKeys < 1 {
		return Renewal{}, false
	}
	owner := 3 + numKeys + 1 // ARGV[2]
	if len(args) <= owner {
		return Renewal{}, false
	}
	return Renewal{Res: fmt.Sprint(args[3]), Field: fmt.Sprint(args[owner])}, true
}
