package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/redisio"
	"github.com/lockactor/lockactor/scripts"
)

// rawLib is the floor: no actors. Each Lock runs the acquire script from the
// caller's goroutine; a refused waiter subscribes to the lock's channel (one
// PubSub shared by the process, fanned out here), tries again, and waits for
// an unlock message or the holder's TTL, as Redisson's RedissonLock does. An
// unlock message wakes one waiter (Redisson's semaphore release), so a
// release does not start a thundering herd.
type rawLib struct {
	rdb  *redis.Client
	id   string
	next atomic.Int64

	ps       *redis.PubSub
	loopDone chan struct{} // closed when the fan-out loop ends

	mu      sync.Mutex
	looping bool // the fan-out loop was started
	chans   map[string]*rawChan
}

// rawChan is one subscribed channel: its confirmation and its waiters.
type rawChan struct {
	ready   chan struct{} // closed when Redis confirmed the subscription
	waiters []*rawWaiter  // FIFO; dead entries are skipped when popped
}

type rawWaiter struct {
	wake chan struct{} // buffered 1
	dead bool          // guarded by rawLib.mu
}

func newRaw(rdb *redis.Client) *rawLib {
	return &rawLib{
		rdb:      rdb,
		id:       uuid.NewString(),
		ps:       rdb.Subscribe(context.Background()),
		loopDone: make(chan struct{}),
		chans:    map[string]*rawChan{},
	}
}

// Locker returns a new owner "<uuid>:<n>" of name.
func (l *rawLib) Locker(name string) locker {
	return &rawOwner{
		lib:     l,
		keys:    []string{name, redisio.LockChannel(name)},
		owner:   l.id + ":" + strconv.FormatInt(l.next.Add(1), 10),
		leaseMS: strconv.FormatInt(lease.Milliseconds(), 10),
	}
}

// Close drops the subscription connection and waits for the fan-out loop.
func (l *rawLib) Close() error {
	err := l.ps.Close()
	l.mu.Lock()
	started := l.looping
	l.mu.Unlock()
	if started {
		<-l.loopDone
	}
	return err
}

// channel returns the state of ch; the first caller subscribes.
func (l *rawLib) channel(ctx context.Context, ch string) (*rawChan, error) {
	l.mu.Lock()
	c := l.chans[ch]
	first := c == nil
	if first {
		c = &rawChan{ready: make(chan struct{})}
		l.chans[ch] = c
	}
	startLoop := !l.looping
	l.looping = true
	l.mu.Unlock()
	if startLoop {
		go l.loop(l.ps.ChannelWithSubscriptions())
	}
	if first {
		if err := l.ps.Subscribe(ctx, ch); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// loop fans pub/sub events out: a confirmation opens the channel's waiters'
// gate, a message wakes the oldest live waiter.
func (l *rawLib) loop(in <-chan any) {
	defer close(l.loopDone)
	for ev := range in {
		switch m := ev.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				l.mu.Lock()
				if c := l.chans[m.Channel]; c != nil && c.ready != nil {
					close(c.ready)
					c.ready = nil
				}
				l.mu.Unlock()
			}
		case *redis.Message:
			l.wakeOne(m.Channel)
		}
	}
}

func (l *rawLib) wakeOne(ch string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.chans[ch]
	if c == nil {
		return
	}
	for len(c.waiters) > 0 {
		w := c.waiters[0]
		c.waiters[0] = nil
		c.waiters = c.waiters[1:]
		if !w.dead {
			w.dead = true
			w.wake <- struct{}{}
			return
		}
	}
}

func (l *rawLib) enqueue(c *rawChan, w *rawWaiter) {
	l.mu.Lock()
	c.waiters = append(c.waiters, w)
	l.mu.Unlock()
}

func (l *rawLib) leave(w *rawWaiter) {
	l.mu.Lock()
	w.dead = true
	l.mu.Unlock()
}

// rawOwner is one owner of one name.
type rawOwner struct {
	lib     *rawLib
	keys    []string // name, channel
	owner   string
	leaseMS string
}

// try runs lock.lua once: granted, or the holder's TTL.
func (o *rawOwner) try(ctx context.Context) (bool, time.Duration, error) {
	ttl, err := scripts.Lock.Run(ctx, o.lib.rdb, o.keys[:1], o.leaseMS, o.owner).Int64()
	if errors.Is(err, redis.Nil) {
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	if ttl < 0 {
		return false, lease, nil
	}
	return false, time.Duration(ttl) * time.Millisecond, nil
}

// Lock tries once; when refused it subscribes, and loops: queue, try, wait
// for a wake-up or the TTL.
func (o *rawOwner) Lock(ctx context.Context) error {
	ok, _, err := o.try(ctx)
	if ok || err != nil {
		return err
	}
	c, err := o.lib.channel(ctx, o.keys[1])
	if err != nil {
		return err
	}
	if ready := o.lib.ready(c); ready != nil {
		select {
		case <-ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		w := &rawWaiter{wake: make(chan struct{}, 1)}
		o.lib.enqueue(c, w)
		ok, ttl, err := o.try(ctx)
		if ok || err != nil {
			o.lib.leave(w)
			return err
		}
		if t == nil {
			t = time.NewTimer(ttl)
		} else {
			t.Reset(ttl)
		}
		select {
		case <-w.wake:
		case <-t.C:
			o.lib.leave(w)
		case <-ctx.Done():
			o.lib.leave(w)
			return ctx.Err()
		}
	}
}

// ready is c's confirmation gate, nil once confirmed.
func (l *rawLib) ready(c *rawChan) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return c.ready
}

// errNotHeld: unlock.lua found no hold of this owner.
var errNotHeld = errors.New("raw: unlock of a lock not held")

// Unlock runs unlock.lua once; a full release publishes the wake-up.
func (o *rawOwner) Unlock(ctx context.Context) error {
	err := scripts.Unlock.Run(ctx, o.lib.rdb, o.keys, redisio.UnlockMessage, o.leaseMS, o.owner, "publish").Err()
	if errors.Is(err, redis.Nil) {
		return errNotHeld
	}
	return err
}

// Renew runs renew.lua once: the Redisson watchdog's per-lock renewal.
func (o *rawOwner) Renew(ctx context.Context, leaseMS string) (bool, error) {
	n, err := scripts.Renew.Run(ctx, o.lib.rdb, o.keys[:1], leaseMS, o.owner).Int64()
	return n == 1, err
}
