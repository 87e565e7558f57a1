package torture

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// Injected errors. Neither starts with NOSCRIPT, so go-redis's script
// fallback does not mistake them; both come from a hook outside go-redis's
// retry loop, so go-redis does not retry them either.
var (
	ErrRefused   = errors.New("torture: command refused by the fault hook (never sent)")
	ErrReplyLost = errors.New("torture: reply lost by the fault hook (the command ran)")
)

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

// window is an active hook fault.
type window struct {
	server string
	client int // -1: every Client of the server
	prob   float64
	rng    *rand.Rand
}

// block is an active FaultBlock: every command of class from one Client
// is refused. A block of settlements also loses the replies of that
// Client's latched scripts with chance loseProb, so that there are lost
// replies to settle while settlements cannot get through.
type block struct {
	server string
	client int
	class  string
	rng    *rand.Rand
}

// blockLoseProb is the chance that a settlement block loses a latched
// script's reply.
const blockLoseProb = 0.3

// Faults is the state the hooks of every Client share: the active windows
// (if any) and what was injected.
type Faults struct {
	mu      sync.Mutex
	active  *window
	blocked *block
	counts  [numEffects]int
}

// Block starts refusing the commands p.Class names from p's Client.
func (f *Faults) Block(p Planned) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = &block{server: p.Server, client: p.Client, class: p.Class, rng: rand.New(rand.NewPCG(p.Seed, 2))}
}

// Unblock ends the block window.
func (f *Faults) Unblock() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = nil
}

// blocks is what a block window does to cmds of server's client:
// EffectBlock when one of them is of the blocked class (a pipeline is
// refused whole), EffectLoseReply for a latched script a settlement block
// picked, else EffectNone. It counts what it did.
func (f *Faults) blocks(server string, client int, cmds []redis.Cmder) Effect {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.blocked
	if b == nil || b.server != server || b.client != client {
		return EffectNone
	}
	latched := false
	for _, cmd := range cmds {
		switch c := classOf(cmd.Args()); {
		case c == b.class:
			f.counts[EffectBlock]++
			return EffectBlock
		case c == ClassRelease || c == ClassAcquire:
			latched = true
		}
	}
	if latched && b.class == ClassResolve && b.rng.Float64() < blockLoseProb {
		f.counts[EffectLoseReply]++
		return EffectLoseReply
	}
	return EffectNone
}

// The classes of command a block window can refuse.
const (
	ClassRelease = "release" // every latched release script
	ClassResolve = "resolve" // settlements of lost replies (latch_resolve.lua)
	ClassAcquire = "acquire" // every latched acquire script (never blocked)
)

var classBySHA = func() map[string]string {
	m := map[string]string{scripts.Resolve.Hash(): ClassResolve}
	for _, s := range []*redis.Script{scripts.Latched.Unlock, scripts.Latched.Handoff, scripts.Latched.FairUnlock,
		scripts.Latched.ReadUnlock, scripts.Latched.WriteUnlock, scripts.Latched.SemaphoreRelease} {
		m[s.Hash()] = ClassRelease
	}
	for _, s := range []*redis.Script{scripts.Latched.Lock, scripts.Latched.FencedLock, scripts.Latched.FairLock,
		scripts.Latched.ReadLock, scripts.Latched.WriteLock, scripts.Latched.SemaphoreAcquire} {
		m[s.Hash()] = ClassAcquire
	}
	return m
}()

// classOf is the class of a script call (EVALSHA or EVAL), or "".
func classOf(args []any) string {
	sha, _ := scriptSHA(args)
	return classBySHA[sha]
}

// scriptSHA is the SHA1 of the script an EVALSHA names or an EVAL (after
// NOSCRIPT) carries; false for any other command.
func scriptSHA(args []any) (string, bool) {
	if len(args) < 2 {
		return "", false
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha":
		return fmt.Sprint(args[1]), true
	case "eval":
		if src, ok := args[1].(string); ok {
			sum := sha1.Sum([]byte(src))
			return hex.EncodeToString(sum[:]), true
		}
	}
	return "", false
}

// Open starts a hook fault window as p plans it.
func (f *Faults) Open(p Planned) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active = &window{server: p.Server, client: p.Client, prob: p.Prob, rng: rand.New(rand.NewPCG(p.Seed, 1))}
}

// Close ends the active window.
func (f *Faults) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active = nil
}

// Counts returns how many commands got each effect.
func (f *Faults) Counts() [numEffects]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

// draw decides the effect on one command of server's client, and a delay.
func (f *Faults) draw(server string, client int) (Effect, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.active
	if w == nil || w.server != server || (w.client >= 0 && w.client != client) || w.rng.Float64() >= w.prob {
		return EffectNone, 0
	}
	e := EffectRefuse
	switch r := w.rng.IntN(20); {
	case r >= 17:
		e = EffectLateReply
	case r >= 14:
		e = EffectDelay
	case r >= 8:
		e = EffectLoseReply
	}
	f.counts[e]++
	d := 50*time.Millisecond + time.Duration(w.rng.Int64N(int64(250*time.Millisecond)))
	if w.rng.IntN(3) == 0 {
		// Longer than the shortest fixed leases (shortLease), up to twice
		// them: a reply that comes back after its grant has expired.
		d = shortLease + time.Duration(w.rng.Int64N(int64(2*shortLeaseMax-shortLease)))
	}
	return e, d
}

// Hook is the redis.Hook on one Client's go-redis client: it injects the
// shared Faults and reports watchdog renewals it sees to OnRenew.
type Hook struct {
	Server  string // "A" or "B"
	Client  int    // index among the server's Clients
	Name    string // "A1", ...
	Faults  *Faults
	OnRenew func(Renewal)
}

var _ redis.Hook = (*Hook)(nil)

// The renewal scripts' SHA1s: EVALSHA names them, EVAL (after NOSCRIPT)
// carries their source.
var (
	renewSHA   = scripts.Renew.Hash()
	rwRenewSHA = scripts.RWRenew.Hash()
)

// DialHook leaves dialling alone.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
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
		return h.fault(cmds, func() error { return next(ctx, cmds) })
	}
}

// fault observes cmds, picks what the active windows do to them (a block
// window first, then a hook window's draw) and sends them with send, or
// not, accordingly.
func (h *Hook) fault(cmds []redis.Cmder, send func() error) error {
	for _, cmd := range cmds {
		h.observe(cmd)
	}
	e, d := h.Faults.blocks(h.Server, h.Client, cmds), time.Duration(0)
	if e == EffectNone {
		e, d = h.Faults.draw(h.Server, h.Client)
	}
	fail := func(err error) error {
		for _, cmd := range cmds {
			cmd.SetErr(err)
		}
		return err
	}
	switch e {
	case EffectRefuse, EffectBlock:
		return fail(ErrRefused)
	case EffectLoseReply:
		_ = send()
		return fail(ErrReplyLost)
	case EffectDelay:
		time.Sleep(d)
	case EffectLateReply:
		err := send()
		time.Sleep(d)
		return err
	}
	return send()
}

// observe reports cmd to OnRenew if it is a renewal script call.
func (h *Hook) observe(cmd redis.Cmder) {
	if h.OnRenew == nil {
		return
	}
	if r, ok := ParseRenewal(cmd.Args()); ok {
		r.T, r.Client, r.Res = time.Now(), h.Name, h.Server+"/"+r.Res
		h.OnRenew(r)
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
