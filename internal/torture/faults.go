package torture

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

// window is an active hook fault.
type window struct {
	server string
	client int // -1: every Client of the server
	prob   float64
	rng    *rand.Rand
}

// block is an active FaultBlock: every command of class from one Client
// (or every Client of the server) is refused. A block of settlements also
// loses, during its first blockLoseFor, the replies of those Clients'
// latched scripts with chance blockLoseProb, so that there are lost replies
// to settle while settlements cannot get through, and the block outlasts
// the latch records of the first ones by several seconds.
type block struct {
	server string
	client int // -1: every Client of the server
	class  string
	from   time.Time
	rng    *rand.Rand
	err    error // what the window answers (see refusals)
}

// A settlement block loses, during its first blockLoseFor, the reply of a
// release script with chance blockLoseRelease (the lost releases are what
// a settlement can get wrong: a partial release sent twice, permits given
// back twice, a final release re-sent), and of an acquire script with
// chance blockLoseAcquire (low: an actor with a reply to settle sends
// nothing else, and should first get to send a release).
const (
	blockLoseRelease = 0.9
	blockLoseAcquire = 0.1
	blockLoseFor     = 3 * time.Second
)

// late is an active FaultLate: the reply of every script of the server's
// Clients that sets a short lease (up to shortLeaseMax) comes back after
// that lease has run out, lateBy past it and up to the lease again: a
// hand-off granting the next owner such a lease, and a renewal with one
// (an Extend's; a watchdog's leases are longer).
type late struct {
	server string
	rng    *rand.Rand
}

// lateBy is the least a FaultLate reply comes back after the lease its
// hand-off granted ran out.
const lateBy = 100 * time.Millisecond

// leaseScript says where a script that sets a lease keeps it and the
// owner it sets it for: ARGV indexes (1-based), whether the owner is a
// permit id sent as raw bytes (the caller knows it in hex), and whether
// the script grants (else it only moves a held lease).
type leaseScript struct {
	name         string
	lease, owner int
	rawID        bool
	grants       bool
	always       bool // recorded whatever its reply (see leaseScripts)
}

// leaseScripts are the scripts that set a lease on one owner's hold. A
// FaultLate window delays the replies of those that set a short one past
// that lease (a hand-off's grant, an Extend's or a renewal's new lease, a
// permit's grant or new lease), and the hook records when each of them had
// run (see LeaseRun): every run of a granting script and of a watchdog
// renewal (a relayed hold's lease is its field's last grant or renewal:
// see CheckStaleGrants), and the runs of the others whose replies it held
// back or lost.
var leaseScripts = map[string]leaseScript{
	scripts.Latched.Handoff.Hash():       {name: "handoff", lease: 4, owner: 3, grants: true},
	scripts.Latched.Lock.Hash():          {name: "lock", lease: 1, owner: 2, grants: true},
	scripts.Latched.FencedLock.Hash():    {name: "fenced_lock", lease: 1, owner: 2, grants: true},
	scripts.Latched.FairLock.Hash():      {name: "fair_lock", lease: 1, owner: 2, grants: true},
	scripts.Latched.ReadLock.Hash():      {name: "read_lock", lease: 1, owner: 2, grants: true},
	scripts.Latched.WriteLock.Hash():     {name: "write_lock", lease: 1, owner: 2, grants: true},
	scripts.Latched.PermitAcquire.Hash(): {name: "permit_acquire", lease: 2, owner: 1, rawID: true, grants: true},
	scripts.Renew.Hash():                 {name: "renew", lease: 1, owner: 2, always: true},
	scripts.PermitUpdate.Hash():          {name: "permit_update", lease: 2, owner: 1, rawID: true},
}

// lateScripts are the leaseScripts whose replies a FaultLate window delays.
var lateScripts = map[string]bool{"handoff": true, "renew": true, "permit_acquire": true, "permit_update": true}

// Withheld is a release script whose reply the hook withheld after it ran
// in Redis (EffectLoseReply): the runtime cannot know it ran, the checker
// can (see CheckLateLost).
type Withheld struct {
	T      time.Time
	Client string // the hooked Client, "A1", ...
	Server string
	Key    string   // KEYS[1], the lock's name
	Args   []string // every argument, to find the owner's field among them
	Reply  string   // the script's reply: an integer, or "nil"
}

// lagWindow is an active FaultSubDelay or FaultSlowLink: what the pub/sub
// connections of one Client (-1: every Client) of the server read arrives
// d late, or every command that Client sends goes out d late.
type lagWindow struct {
	server string
	client int
	d      time.Duration
}

// Faults is the state the hooks of every Client share: the active windows
// (if any) and what was injected.
type Faults struct {
	mu       sync.Mutex
	active   *window
	blocked  *block
	slow     *late
	subLag   *lagWindow // an active FaultSubDelay
	link     *lagWindow // an active FaultSlowLink
	counts   [numEffects]int
	withheld []Withheld
	runs     []LeaseRun
	clashes  []clashSend
}

// Block starts refusing the commands p.Class names from p's Client (every
// Client of p.Server when p.Client is -1).
func (f *Faults) Block(p Planned) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = &block{server: p.Server, client: p.Client, class: p.Class, from: time.Now(), rng: rand.New(rand.NewPCG(p.Seed, 2)), err: refusalOf(p)}
}

// Unblock ends the block window.
func (f *Faults) Unblock() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = nil
}

// Slow starts delaying the replies of p.Server's release scripts.
func (f *Faults) Slow(p Planned) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow = &late{server: p.Server, rng: rand.New(rand.NewPCG(p.Seed, 3))}
}

// Unslow ends the late-reply window.
func (f *Faults) Unslow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow = nil
}

// blocks is what a block window does to cmds of server's client:
// EffectBlock when one of them is of the blocked class (a pipeline is
// refused whole), EffectLoseReply for a latched script a settlement block
// picked, else EffectNone. It counts what it did.
func (f *Faults) blocks(server string, client int, cmds []redis.Cmder) Effect {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.blocked
	if b == nil || b.server != server || (b.client >= 0 && b.client != client) {
		return EffectNone
	}
	lose := 0.0
	for _, cmd := range cmds {
		switch c := classOf(cmd.Args()); {
		case c == b.class:
			f.counts[EffectBlock]++
			return EffectBlock
		case c == ClassRelease:
			lose = blockLoseRelease
		case c == ClassAcquire:
			lose = max(lose, blockLoseAcquire)
		}
	}
	if lose > 0 && b.class == ClassResolve && time.Since(b.from) < blockLoseFor && b.rng.Float64() < lose {
		f.counts[EffectLoseReply]++
		return EffectLoseReply
	}
	return EffectNone
}

// blockRefusal is what the block window answers a command it refuses
// (ErrRefused once the window has ended).
func (f *Faults) blockRefusal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.blocked == nil {
		return ErrRefused
	}
	return f.blocked.err
}

// lateReply is how late the reply of cmds of server comes back: 0 unless
// a FaultLate window of server is open and one of cmds sets a short lease
// (see late).
func (f *Faults) lateReply(server string, cmds []redis.Cmder) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.slow
	if s == nil || s.server != server {
		return 0
	}
	for _, cmd := range cmds {
		args := cmd.Args()
		sha, _ := scriptSHA(args)
		ls, ok := leaseScripts[sha]
		if !ok || !lateScripts[ls.name] {
			continue
		}
		lease, ok := scriptArg(args, ls.lease) // in ms
		if !ok || lease <= 0 || lease > shortLeaseMax.Milliseconds() {
			continue
		}
		f.counts[EffectLateReply]++
		d := time.Duration(lease) * time.Millisecond
		return d + lateBy + time.Duration(s.rng.Int64N(int64(d)+1))
	}
	return 0
}

// SlowSub starts delaying what the pub/sub connections of p's Client
// (every Client of p.Server when p.Client is -1) read, by p.Lag.
func (f *Faults) SlowSub(p Planned) { f.setLag(&f.subLag, &p) }

// UnslowSub ends the pub/sub delay window.
func (f *Faults) UnslowSub() { f.setLag(&f.subLag, nil) }

// SlowLink starts delaying every command of p's Client by p.Lag.
func (f *Faults) SlowLink(p Planned) { f.setLag(&f.link, &p) }

// UnslowLink ends the slow-link window.
func (f *Faults) UnslowLink() { f.setLag(&f.link, nil) }

// linkDelay is how late a command of server's client goes out now.
func (f *Faults) linkDelay(server string, client int) time.Duration {
	return f.lagOf(&f.link, server, client)
}

// subDelay is how late what server's client reads on a pub/sub connection
// arrives now.
func (f *Faults) subDelay(server string, client int) time.Duration {
	return f.lagOf(&f.subLag, server, client)
}

// setLag opens the lag window at w for p, or ends it (p nil).
func (f *Faults) setLag(w **lagWindow, p *Planned) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*w = nil
	if p != nil {
		*w = &lagWindow{server: p.Server, client: p.Client, d: p.Lag}
	}
}

// lagOf is how late the window at w makes server's client run now.
func (f *Faults) lagOf(w **lagWindow, server string, client int) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := *w
	if s == nil || s.server != server || (s.client >= 0 && s.client != client) {
		return 0
	}
	return s.d
}

// withhold records the release scripts among cmds, which ran, whose
// replies the hook is about to replace by ErrReplyLost.
func (f *Faults) withhold(server, client string, cmds []redis.Cmder) {
	now := time.Now()
	for _, cmd := range cmds {
		args := cmd.Args()
		if classOf(args) != ClassRelease || len(args) < 4 {
			continue
		}
		w := Withheld{T: now, Client: client, Server: server, Key: fmt.Sprint(args[3]), Reply: "nil"}
		for _, a := range args {
			w.Args = append(w.Args, fmt.Sprint(a))
		}
		// The latch sends a nil body reply as a status (redisio.LatchNil).
		if c, ok := cmd.(*redis.Cmd); ok && c.Err() == nil && c.Val() != nil && c.Val() != redisio.LatchNil {
			w.Reply = fmt.Sprint(c.Val())
		}
		f.mu.Lock()
		f.withheld = append(f.withheld, w)
		f.mu.Unlock()
	}
}

// clashSend is a release script the hook saw go out to a kind-clash step's
// name (see clashStep), and when.
type clashSend struct {
	t   time.Time
	res string // "<server>/<name>"
	sha string // the script's
}

// noteClashSends records the release scripts among cmds of server that go
// out to a kind-clash step's name.
func (f *Faults) noteClashSends(server string, cmds []redis.Cmder) {
	for _, cmd := range cmds {
		args := cmd.Args()
		if len(args) < 4 || classOf(args) != ClassRelease {
			continue
		}
		if key := fmt.Sprint(args[3]); strings.HasPrefix(key, clashPrefix) {
			sha, _ := scriptSHA(args)
			f.mu.Lock()
			f.clashes = append(f.clashes, clashSend{t: time.Now(), res: server + "/" + key, sha: sha})
			f.mu.Unlock()
		}
	}
}

// clashSends returns the release scripts sent to kind-clash names so far.
func (f *Faults) clashSends() []clashSend {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]clashSend(nil), f.clashes...)
}

// Withheld returns the release replies the hook withheld.
func (f *Faults) Withheld() []Withheld {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Withheld(nil), f.withheld...)
}

// The classes of command a block window can refuse.
const (
	ClassRelease = "release" // every latched release script (and CountDown)
	ClassResolve = "resolve" // settlements of lost replies (latch_resolve.lua)
	ClassAcquire = "acquire" // every latched acquire script (never blocked)
)

var classBySHA = func() map[string]string {
	m := map[string]string{scripts.Resolve.Hash(): ClassResolve}
	for _, s := range []*redis.Script{scripts.Latched.Unlock, scripts.Latched.Handoff, scripts.Latched.FairUnlock,
		scripts.Latched.ReadUnlock, scripts.Latched.WriteUnlock, scripts.Latched.SemaphoreRelease,
		scripts.Latched.PermitRelease, scripts.Latched.CountDownDown} {
		m[s.Hash()] = ClassRelease
	}
	for _, s := range []*redis.Script{scripts.Latched.Lock, scripts.Latched.FencedLock, scripts.Latched.FairLock,
		scripts.Latched.ReadLock, scripts.Latched.WriteLock, scripts.Latched.SemaphoreAcquire,
		scripts.Latched.PermitAcquire, scripts.Latched.CountDownSet} {
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
