package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lockactor/lockactor"
)

var fencedCommand = command{
	name:    "fenced",
	summary: "a storage service rejects the write of a paused holder whose lease ran out",
	doc: "Instance A takes a FencedLock with a fixed --lease and writes to a\n" +
		"simulated storage service with its fencing token. Then A pauses (think of\n" +
		"a long GC pause) past its lease; instance B takes the lock, gets a higher\n" +
		"token and writes. When A wakes up and writes with its old token, the\n" +
		"storage rejects it: the lock alone cannot stop a paused holder, the token\n" +
		"can.",
	common: flagRedis,
	new:    func() scenario { return new(fencedDemo) },
}

// fencedDemo is the fenced scenario and its flags.
type fencedDemo struct {
	lease time.Duration
}

func (d *fencedDemo) define(fs *flag.FlagSet) {
	fs.DurationVar(&d.lease, "lease", 500*time.Millisecond, "fixed lease of A's hold (A pauses for at least twice as long)")
}

func (d *fencedDemo) check(*options) error { return positiveDur("lease", d.lease) }

// storage is the simulated service: it remembers the highest fencing token
// it has seen and rejects writes that carry a lower one.
type storage struct {
	mu      sync.Mutex
	highest uint64
	value   string
}

// errStaleToken is the storage's answer to a write with an old token.
var errStaleToken = errors.New("stale fencing token")

// write stores value if token is at least the highest token seen.
func (s *storage) write(token uint64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return fmt.Errorf("%w %d: already saw %d", errStaleToken, token, s.highest)
	}
	s.highest, s.value = token, value
	return nil
}

// fencedJSON is the --json form of a fenced run.
type fencedJSON struct {
	Scenario      string  `json:"scenario"`
	Backend       string  `json:"backend"`
	Lease         float64 `json:"lease_seconds"`
	Paused        float64 `json:"paused_seconds"`
	TokenA        uint64  `json:"token_a"`
	TokenB        uint64  `json:"token_b"`
	StaleRejected bool    `json:"stale_write_rejected"`
	Rejection     string  `json:"rejection,omitempty"`
	FinalValue    string  `json:"final_value"`
	OK            bool    `json:"ok"`
}

func (d *fencedDemo) run(ctx context.Context, e *env) error {
	clients, err := newClients(e.be.rdb, 2)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	name := e.key("lock")
	// The token counter never expires: remove it when done (its key, as
	// docs/PROTOCOL.md names it, is redisson_lock_token:{name}).
	defer e.be.rdb.Del(context.WithoutCancel(ctx), "redisson_lock_token:{"+name+"}")
	a, b := clients[0].FencedLock(name), clients[1].FencedLock(name)
	store := new(storage)
	res := fencedJSON{Scenario: "fenced", Backend: e.backendDesc(), Lease: seconds(d.lease)}
	e.logf("fenced: lease %v, against %s", d.lease, e.backendDesc())

	if ok, err := a.TryLock(ctx, lockactor.WithLease(d.lease)); err != nil || !ok {
		return fmt.Errorf("instance A's TryLock = %v, %v", ok, err)
	}
	res.TokenA = a.Token()
	e.eventf("A: TryLock(lease %v) -> acquired, token %d", d.lease, res.TokenA)
	if err := store.write(res.TokenA, "A's first write"); err != nil {
		return err
	}
	e.eventf("A: write(token %d, \"A's first write\") -> accepted", res.TokenA)

	paused := time.Now()
	e.eventf("A: pauses (a long GC pause; its lease runs out meanwhile)")
	// While A is paused, B runs: A's pause lasts until B has written, and
	// at least twice A's lease.
	if err := d.second(ctx, e, b, store, &res); err != nil {
		return err
	}
	sleep(ctx, 2*d.lease-time.Since(paused))
	res.Paused = seconds(time.Since(paused))
	e.eventf("A: wakes up after %v, still believes it holds the lock", time.Since(paused).Round(time.Millisecond))

	err = store.write(res.TokenA, "A's stale write")
	res.StaleRejected = errors.Is(err, errStaleToken)
	if err != nil {
		res.Rejection = err.Error()
		e.eventf("A: write(token %d, \"A's stale write\") -> REJECTED: %v", res.TokenA, err)
	} else {
		e.eventf("A: write(token %d, \"A's stale write\") -> accepted: B's data is overwritten", res.TokenA)
	}
	if err := unlockFor(ctx, a); errors.Is(err, lockactor.ErrNotHeld) {
		e.eventf("A: Unlock -> ErrNotHeld (its lease had run out)")
	}
	if err := unlockFor(ctx, b); err != nil {
		return err
	}
	res.FinalValue = store.value
	res.OK = res.StaleRejected && res.TokenB > res.TokenA && res.FinalValue == "B's write"
	if err := e.result(res, func(w io.Writer) {
		fmt.Fprintf(w, "tokens: A %d, B %d (strictly increasing)\n", res.TokenA, res.TokenB)
		fmt.Fprintf(w, "storage holds: %q\n", res.FinalValue)
		fmt.Fprintf(w, "stale token rejected: %s\n", verdict(res.OK))
	}); err != nil {
		return err
	}
	if !res.OK {
		return errors.New("the paused holder's stale write was not rejected")
	}
	return nil
}

// second is instance B: it waits for the lock (until A's lease runs out),
// then writes with its own token.
func (d *fencedDemo) second(ctx context.Context, e *env, b *lockactor.Lock, store *storage, res *fencedJSON) error {
	asked := time.Now()
	wctx, cancel := context.WithTimeout(ctx, d.lease+10*time.Second)
	defer cancel()
	if err := b.Lock(wctx); err != nil {
		return fmt.Errorf("instance B's Lock: %w", err)
	}
	res.TokenB = b.Token()
	e.eventf("B: Lock -> acquired after %v (A's lease ran out), token %d", time.Since(asked).Round(time.Millisecond), res.TokenB)
	if err := store.write(res.TokenB, "B's write"); err != nil {
		return fmt.Errorf("instance B's write: %w", err)
	}
	e.eventf("B: write(token %d, \"B's write\") -> accepted", res.TokenB)
	return nil
}
