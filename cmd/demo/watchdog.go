package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/lockactor/lockactor"
)

var watchdogCommand = command{
	name:    "watchdog",
	summary: "a long hold is kept alive, a crashed holder's lock is taken over, a deleted lock fires Lost()",
	doc: "Three acts on Clients with a short --watchdog timeout (the lease of holds\n" +
		"taken without WithLease; renewed every third of it while held):\n" +
		"  1. a holder works 3x longer than the watchdog timeout and keeps the lock,\n" +
		"     while another instance's TryLock keeps failing;\n" +
		"  2. a holder crashes (its Client is closed without Unlock): the lock is\n" +
		"     taken over once its lease runs out, at most one watchdog timeout later;\n" +
		"  3. the lock is deleted behind its holder's back (DEL): Lost() fires at\n" +
		"     the next renewal.",
	common: flagRedis,
	new:    func() scenario { return new(watchdogDemo) },
}

// watchdogDemo is the watchdog scenario and its flags.
type watchdogDemo struct {
	watchdog time.Duration
}

func (d *watchdogDemo) define(fs *flag.FlagSet) {
	fs.DurationVar(&d.watchdog, "watchdog", time.Second, "watchdog timeout of the Clients (the scenario takes about 5x it)")
}

func (d *watchdogDemo) check(*options) error { return positiveDur("watchdog", d.watchdog) }

// watchdogJSON is the --json form of a watchdog run.
type watchdogJSON struct {
	Scenario        string  `json:"scenario"`
	Backend         string  `json:"backend"`
	Watchdog        float64 `json:"watchdog_seconds"`
	HeldFor         float64 `json:"held_seconds"`
	TryLockFailures int     `json:"other_trylock_failures"`
	KeptLock        bool    `json:"kept_lock"`
	TTLAtCrash      float64 `json:"ttl_at_crash_seconds"`
	TakeoverAfter   float64 `json:"takeover_after_seconds"`
	LostAfter       float64 `json:"lost_after_seconds"`
	OK              bool    `json:"ok"`
}

func (d *watchdogDemo) run(ctx context.Context, e *env) error {
	clients, err := newClients(e.be.rdb, 3, lockactor.WithWatchdogTimeout(d.watchdog))
	if err != nil {
		return err
	}
	defer closeAll(clients)
	res := watchdogJSON{Scenario: "watchdog", Backend: e.backendDesc(), Watchdog: seconds(d.watchdog)}
	e.logf("watchdog: timeout %v (renewal every %v) against %s", d.watchdog, (d.watchdog / 3).Round(time.Millisecond), e.backendDesc())

	if err := d.longHold(ctx, e, clients[0], clients[1], &res); err != nil {
		return err
	}
	crashed := clients[2]
	if err := d.crash(ctx, e, crashed, clients[1], &res); err != nil {
		return err
	}
	if err := d.deleted(ctx, e, clients[0], &res); err != nil {
		return err
	}
	res.OK = res.KeptLock && res.TakeoverAfter > 0 && res.LostAfter > 0
	return e.result(res, func(w io.Writer) {
		fmt.Fprintf(w, "\nlong hold:  held %.2fs = %.1fx the watchdog timeout, other instance's TryLock failed %d times: %s\n",
			res.HeldFor, res.HeldFor/res.Watchdog, res.TryLockFailures, verdict(res.KeptLock))
		fmt.Fprintf(w, "crash:      lock taken over %.2fs after the crash (lease left then: %.2fs, watchdog timeout %v)\n",
			res.TakeoverAfter, res.TTLAtCrash, d.watchdog)
		fmt.Fprintf(w, "deleted:    Lost() fired %.3fs after the DEL (renewal every %v)\n", res.LostAfter, (d.watchdog / 3).Round(time.Millisecond))
		fmt.Fprintf(w, "watchdog: %s\n", verdict(res.OK))
	})
}

// longHold: a holds for 3 watchdog timeouts while b tries and fails.
func (d *watchdogDemo) longHold(ctx context.Context, e *env, a, b *lockactor.Client, res *watchdogJSON) error {
	e.logf("\n1. a holder works 3x longer than the watchdog timeout")
	holder, other := a.Lock(e.key("long")), b.Lock(e.key("long"))
	if err := holder.Lock(ctx); err != nil {
		return err
	}
	start := time.Now()
	e.eventf("instance A: Lock -> acquired, starts %v of work", 3*d.watchdog)
	res.KeptLock = true
	for time.Since(start) < 3*d.watchdog {
		sleep(ctx, d.watchdog/2)
		ok, err := other.TryLock(ctx)
		if err != nil {
			return err
		}
		ttl, err := holder.RemainingLease(ctx)
		if err != nil {
			return err
		}
		if ok {
			res.KeptLock = false
			e.eventf("instance B: TryLock -> ACQUIRED: A's lock was lost")
			_ = other.Unlock(ctx)
			continue
		}
		res.TryLockFailures++
		e.eventf("instance B: TryLock -> false (A has held %v, lease left %v)",
			time.Since(start).Round(10*time.Millisecond), ttl.Round(10*time.Millisecond))
	}
	select {
	case <-holder.Lost():
		res.KeptLock = false
	default:
	}
	res.HeldFor = seconds(time.Since(start))
	if err := holder.Unlock(ctx); err != nil {
		res.KeptLock = false
		e.eventf("instance A: Unlock -> %v", err)
		return nil
	}
	e.eventf("instance A: done after %.2fs, Unlock -> ok", res.HeldFor)
	return nil
}

// crash: c takes the lock and its Client is closed without Unlock; b waits
// for it.
func (d *watchdogDemo) crash(ctx context.Context, e *env, c, b *lockactor.Client, res *watchdogJSON) error {
	e.logf("\n2. a holder crashes: its Client is closed without Unlock")
	doomed, waiter := c.Lock(e.key("crash")), b.Lock(e.key("crash"))
	if err := doomed.Lock(ctx); err != nil {
		return err
	}
	e.eventf("instance C: Lock -> acquired")
	sleep(ctx, d.watchdog/2) // let a renewal or two happen
	ttl, err := doomed.RemainingLease(ctx)
	if err != nil {
		return err
	}
	_ = c.Close()
	crashed := time.Now()
	res.TTLAtCrash = seconds(ttl)
	e.eventf("instance C: crashes (Client.Close, no Unlock); lease left %v", ttl.Round(time.Millisecond))
	wctx, cancel := context.WithTimeout(ctx, 3*d.watchdog+5*time.Second)
	defer cancel()
	if err := waiter.Lock(wctx); err != nil {
		return fmt.Errorf("the crashed holder's lock was not taken over: %w", err)
	}
	took := time.Since(crashed)
	res.TakeoverAfter = seconds(took)
	e.eventf("instance B: Lock -> acquired, %v after the crash", took.Round(time.Millisecond))
	return waiter.Unlock(ctx)
}

// deleted: a's lock is deleted with DEL; Lost fires at the next renewal.
func (d *watchdogDemo) deleted(ctx context.Context, e *env, a *lockactor.Client, res *watchdogJSON) error {
	e.logf("\n3. the lock is deleted behind its holder's back")
	name := e.key("deleted")
	holder := a.Lock(name)
	if err := holder.Lock(ctx); err != nil {
		return err
	}
	lost := holder.Lost()
	e.eventf("instance A: Lock -> acquired")
	sleep(ctx, d.watchdog/6)
	if err := e.be.rdb.Del(ctx, name).Err(); err != nil {
		return fmt.Errorf("DEL %s: %w", name, err)
	}
	deleted := time.Now()
	e.eventf("operator:   DEL %s", name)
	select {
	case <-lost:
		took := time.Since(deleted)
		res.LostAfter = seconds(took)
		e.eventf("instance A: Lost() closed, %v after the DEL", took.Round(time.Millisecond))
	case <-time.After(3 * d.watchdog):
		e.eventf("instance A: Lost() still open %v after the DEL", 3*d.watchdog)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := holder.Unlock(ctx); errors.Is(err, lockactor.ErrNotHeld) {
		e.eventf("instance A: Unlock -> ErrNotHeld, as it should")
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
