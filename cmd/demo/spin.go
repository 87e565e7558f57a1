package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor"
)

var spinCommand = command{
	name:    "spin",
	summary: "SpinLock waiters retry with backoff and never subscribe to pub/sub",
	doc: "Instance A holds a plain Lock for --hold. Meanwhile --waiters instances\n" +
		"wait for the same name with SpinLock: instead of subscribing to the lock's\n" +
		"channel they retry with exponential backoff and jitter, up to --cap. The\n" +
		"demo counts the subscribers on the lock's channel while they wait (zero),\n" +
		"then A unlocks and each waiter takes the lock in turn, never two at once.",
	common: flagRedis,
	new:    func() scenario { return new(spinDemo) },
}

// spinDemo is the spin scenario and its flags.
type spinDemo struct {
	waiters int
	hold    time.Duration
	spinCap time.Duration
}

func (d *spinDemo) define(fs *flag.FlagSet) {
	fs.IntVar(&d.waiters, "waiters", 3, "SpinLock instances waiting while A holds")
	fs.DurationVar(&d.hold, "hold", 300*time.Millisecond, "how long A holds the lock")
	fs.DurationVar(&d.spinCap, "cap", 50*time.Millisecond, "the waiters' backoff cap (WithSpinBackoff(1ms, cap))")
}

func (d *spinDemo) check(*options) error {
	if d.waiters < 1 {
		return fmt.Errorf("--waiters must be at least 1, got %d", d.waiters)
	}
	return firstErr(positiveDur("hold", d.hold), positiveDur("cap", d.spinCap))
}

// spinJSON is the --json form of a spin run.
type spinJSON struct {
	Scenario    string    `json:"scenario"`
	Backend     string    `json:"backend"`
	Waiters     int       `json:"waiters"`
	Cap         float64   `json:"cap_seconds"`
	Subscribers int64     `json:"channel_subscribers_while_waiting"`
	FirstGrant  float64   `json:"first_grant_after_unlock_seconds"`
	Grants      []float64 `json:"grants_seconds"`
	MostInside  int64     `json:"most_holders_at_once"`
	OK          bool      `json:"ok"`
}

func (d *spinDemo) run(ctx context.Context, e *env) error {
	holderClient, err := newClients(e.be.rdb, 1)
	if err != nil {
		return err
	}
	defer closeAll(holderClient)
	spinners, err := newClients(e.be.rdb, d.waiters, lockactor.WithSpinBackoff(time.Millisecond, d.spinCap))
	if err != nil {
		return err
	}
	defer closeAll(spinners)
	name := e.key("lock")
	channel := "redisson_lock__channel:{" + name + "}"
	res := spinJSON{Scenario: "spin", Backend: e.backendDesc(), Waiters: d.waiters, Cap: seconds(d.spinCap)}
	e.logf("spin: %d SpinLock waiters, backoff 1ms..%v, against %s", d.waiters, d.spinCap, e.backendDesc())

	a := holderClient[0].Lock(name)
	if err := a.Lock(ctx); err != nil {
		return fmt.Errorf("instance A's Lock: %w", err)
	}
	e.eventf("A: Lock -> acquired; holds for %v", d.hold)

	var inside, most atomic.Int64
	var mu sync.Mutex
	var unlocked time.Time
	var order []int // waiters in grant order
	var wg sync.WaitGroup
	errs := make(chan error, d.waiters)
	for i, c := range spinners {
		l := c.SpinLock(name)
		wg.Go(func() {
			if err := l.Lock(ctx); err != nil {
				errs <- fmt.Errorf("waiter %d: %w", i+1, err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			mu.Lock() // printed after the run: eventf is not for concurrent use
			after := time.Since(unlocked)
			res.Grants = append(res.Grants, seconds(after))
			order = append(order, i+1)
			mu.Unlock()
			sleep(ctx, 20*time.Millisecond)
			inside.Add(-1)
			errs <- unlockFor(ctx, l)
		})
	}
	sleep(ctx, d.hold/2)
	n, err := e.be.rdb.PubSubNumSub(ctx, channel).Result()
	if err != nil {
		return fmt.Errorf("PUBSUB NUMSUB: %w", err)
	}
	res.Subscribers = n[channel]
	e.eventf("PUBSUB NUMSUB %s -> %d while %d waiters spin", channel, res.Subscribers, d.waiters)
	sleep(ctx, d.hold-d.hold/2)

	mu.Lock()
	unlocked = time.Now()
	mu.Unlock()
	if err := unlockFor(ctx, a); err != nil {
		return fmt.Errorf("instance A's Unlock: %w", err)
	}
	e.eventf("A: Unlock")
	wg.Wait()
	for k, w := range order {
		e.eventf("waiter %d: SpinLock -> acquired %v after A's Unlock", w, ms(time.Duration(res.Grants[k]*float64(time.Second))))
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	if len(res.Grants) > 0 {
		res.FirstGrant = res.Grants[0]
	}
	res.MostInside = most.Load()
	res.OK = res.Subscribers == 0 && res.MostInside == 1 && len(res.Grants) == d.waiters
	if err := e.result(res, func(w io.Writer) {
		fmt.Fprintf(w, "channel subscribers while waiting: %d\n", res.Subscribers)
		fmt.Fprintf(w, "first grant %v after the Unlock (cap %v)\n", ms(time.Duration(res.FirstGrant*float64(time.Second))), d.spinCap)
		fmt.Fprintf(w, "most holders at once: %d\n", res.MostInside)
		fmt.Fprintf(w, "spin without pub/sub: %s\n", verdict(res.OK))
	}); err != nil {
		return err
	}
	if !res.OK {
		return errors.New("a SpinLock waiter subscribed, or two held at once")
	}
	return nil
}
