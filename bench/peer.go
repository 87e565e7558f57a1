package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

// A peer is a waiter of another implementation on the multiproc scenario's
// key, run by the parent while the children load it: it speaks Redisson's
// layout through plain scripts and waits as node-redisson does (after a
// refusal it subscribes to the lock's channel and waits for a message or
// the holder's TTL; on a message it unsubscribes, and only then tries
// again), which reacts more slowly than Redisson's own semaphore. It takes
// the lock, leaves at once, and pauses peerGap between rounds. What it
// measures says whether the library's runs of local hand-offs let another
// process in: its longest wait in time, and in grants made by others.
//
// With javaStyle it waits as Redisson's RedissonLock does instead: it stays
// subscribed while it waits and tries again as soon as a message comes, so
// it reacts one round trip sooner.
const peerGap = 3 * time.Millisecond

// peerSettle is how far into the window a wait must begin to count as
// settled (see peerResult).
const peerSettle = 250 * time.Millisecond

// peerResult is what the peer measured in the window.
type peerResult struct {
	Rounds    int64   `json:"rounds"`     // grants it got
	Waited    int64   `json:"waited"`     // rounds whose first try was refused
	WaitMax   float64 `json:"wait_max"`   // its longest wait, seconds
	GrantsMax int64   `json:"grants_max"` // most grants to others during one of its waits
	// The same two for the waits that began peerSettle or more into the
	// window: what a waiter meets once the libraries' Clients have had
	// time to find it (a lockactor Client learns of a foreign waiter from
	// a count; the first waits cover that).
	WaitMaxSettled   float64 `json:"wait_max_settled"`
	GrantsMaxSettled int64   `json:"grants_max_settled"`
	Violations       int64   `json:"violations"`  // grants while another holder was inside
	Errors           int64   `json:"errors"`      // failed calls
	FirstErr         string  `json:"first_error"` // the first of them
}

// runPeer plays the peer on name from start to end through rdb; in holds
// the processes' shared counters (cell 0 is name's).
func runPeer(rdb *redis.Client, name string, javaStyle bool, in *inside, start, end time.Time) peerResult {
	var res peerResult
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	p := &peer{rdb: rdb, ps: rdb.Subscribe(context.Background()), name: name,
		channel: redisio.LockChannel(name), owner: uuid.NewString() + ":1", java: javaStyle,
		leaseMS: strconv.FormatInt(lease.Milliseconds(), 10)}
	defer p.ps.Close()
	time.Sleep(time.Until(start))
	for ctx.Err() == nil {
		t0, g0 := time.Now(), in.grants()
		refused, err := p.lock(ctx)
		if err != nil {
			if ctx.Err() == nil {
				res.fail(err)
			}
			break
		}
		if waited := time.Since(t0); refused {
			res.Waited++
			res.WaitMax = max(res.WaitMax, waited.Seconds())
			res.GrantsMax = max(res.GrantsMax, in.grants()-g0)
			if t0.Sub(start) >= peerSettle {
				res.WaitMaxSettled = max(res.WaitMaxSettled, waited.Seconds())
				res.GrantsMaxSettled = max(res.GrantsMaxSettled, in.grants()-g0)
			}
		}
		if !in.enter(0) {
			res.Violations++
		}
		in.exit(0)
		res.Rounds++
		uctx, ucancel := context.WithTimeout(context.Background(), unlockTimeout)
		err = scripts.Unlock.Run(uctx, rdb, []string{name, p.channel}, redisio.UnlockMessage, p.leaseMS, p.owner, "publish").Err()
		ucancel()
		if err != nil {
			res.fail(fmt.Errorf("unlock: %w", err))
		}
		time.Sleep(peerGap)
	}
	return res
}

func (r *peerResult) fail(err error) {
	r.Errors++
	if r.FirstErr == "" {
		r.FirstErr = err.Error()
	}
}

type peer struct {
	rdb                           *redis.Client
	ps                            *redis.PubSub
	name, channel, owner, leaseMS string
	java                          bool // stays subscribed while it waits
}

// lock returns once the peer holds the lock, and whether a try was refused
// on the way.
func (p *peer) lock(ctx context.Context) (refused bool, err error) {
	subscribed := false
	defer func() {
		if subscribed && err == nil {
			err = p.unsubscribe(ctx)
		}
	}()
	for {
		ttl, err := scripts.Lock.Run(ctx, p.rdb, []string{p.name}, p.leaseMS, p.owner).Int64()
		if errors.Is(err, redis.Nil) {
			return refused, nil
		}
		if err != nil {
			return refused, err
		}
		refused = true
		wait := max(time.Duration(ttl)*time.Millisecond, time.Millisecond)
		if p.java {
			if !subscribed {
				if err := p.ps.Subscribe(ctx, p.channel); err != nil {
					return refused, err
				}
				if err := p.await(ctx, isSubscription("subscribe"), time.Second); err != nil {
					return refused, err
				}
				subscribed = true
				continue // a message may have gone by before the subscription
			}
			if err := p.await(ctx, isMessage, wait); err != nil && !errors.Is(err, errPeerTimeout) {
				return refused, err
			}
			continue
		}
		if err := p.ps.Subscribe(ctx, p.channel); err != nil {
			return refused, err
		}
		if err := p.await(ctx, isSubscription("subscribe"), time.Second); err != nil {
			return refused, err
		}
		if err := p.await(ctx, isMessage, wait); err != nil && !errors.Is(err, errPeerTimeout) {
			return refused, err
		}
		if err := p.unsubscribe(ctx); err != nil {
			return refused, err
		}
	}
}

// unsubscribe leaves the lock's channel and waits until Redis confirms.
func (p *peer) unsubscribe(ctx context.Context) error {
	if err := p.ps.Unsubscribe(ctx, p.channel); err != nil {
		return err
	}
	return p.await(ctx, isSubscription("unsubscribe"), time.Second)
}

var errPeerTimeout = errors.New("peer: wait timed out")

func isSubscription(kind string) func(any) bool {
	return func(m any) bool { s, ok := m.(*redis.Subscription); return ok && s.Kind == kind }
}

func isMessage(m any) bool { _, ok := m.(*redis.Message); return ok }

// await reads the subscription until want accepts an event, or d passes.
func (p *peer) await(ctx context.Context, want func(any) bool, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return errPeerTimeout
		}
		m, err := p.ps.ReceiveTimeout(ctx, left)
		var te interface{ Timeout() bool }
		if errors.As(err, &te) && te.Timeout() {
			return errPeerTimeout
		}
		if err != nil {
			return err
		}
		if want(m) {
			return nil
		}
	}
}
