package actors

import (
	"sync"
	"time"
)

// virtual is the state machines' scheduler in tests: actors run on the
// goroutine that drives it (run, advance), and time moves only when the
// test advances it, firing the timers that fall due in the order they do.
// A test is then exact: "no retry at 319 ms, one at 320 ms".
type virtual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64 // orders timers due at the same instant by arming
	timers []*vtimer
	queue  []delivery
	active bool // run is delivering (a stop then queues rather than runs)
}

type delivery struct {
	box *vbox
	msg any
}

// newVirtual starts the clock a whole hour after epoch: watchdog periods
// that divide an hour then fall due a whole period after the start (see
// holdBook.arm), so rows can name them.
func newVirtual() *virtual { return &virtual{now: epoch.Add(time.Hour)} }

func (v *virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

func (v *virtual) AfterFunc(d time.Duration, f func()) timer {
	t := &vtimer{v: v, f: f}
	t.Reset(d)
	return t
}

func (v *virtual) spawn(m machine) mailbox {
	b := &vbox{v: v, m: m}
	b.post(&started{box: b})
	return b
}

func (v *virtual) shutdown(time.Time) {}

// run delivers the queued messages, and those they cause, until none is
// left.
func (v *virtual) run() {
	v.mu.Lock()
	if v.active {
		v.mu.Unlock()
		return
	}
	v.active = true
	for len(v.queue) > 0 {
		d := v.queue[0]
		v.queue[0] = delivery{}
		v.queue = v.queue[1:]
		if d.box.dead {
			continue
		}
		v.mu.Unlock()
		d.box.deliver(d.msg)
		v.mu.Lock()
	}
	v.active = false
	v.mu.Unlock()
}

// advance moves the clock d ahead, firing each timer that falls due on
// the way at its own instant, and delivering what it causes before the
// next.
func (v *virtual) advance(d time.Duration) {
	v.run()
	v.mu.Lock()
	end := v.now.Add(d)
	v.mu.Unlock()
	for v.fireBy(end) {
	}
	v.mu.Lock()
	v.now = end
	v.mu.Unlock()
}

// fireBy moves the clock to the next armed timer, if one falls due by
// limit, fires it and delivers what it causes; false if none does.
func (v *virtual) fireBy(limit time.Time) bool {
	v.run()
	v.mu.Lock()
	var next *vtimer
	for _, t := range v.timers {
		if next == nil || t.when.Before(next.when) || (t.when.Equal(next.when) && t.seq < next.seq) {
			next = t
		}
	}
	if next == nil || next.when.After(limit) {
		v.mu.Unlock()
		return false
	}
	next.disarm()
	if next.when.After(v.now) {
		v.now = next.when
	}
	v.mu.Unlock()
	next.f()
	v.run()
	return true
}

// vtimer is a timer of the virtual clock.
type vtimer struct {
	v     *virtual
	f     func()
	when  time.Time
	seq   uint64
	armed bool
}

func (t *vtimer) Stop() bool {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	was := t.armed
	t.disarm()
	return was
}

func (t *vtimer) Reset(d time.Duration) bool {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	was := t.armed
	t.disarm()
	v.seq++
	t.when, t.seq, t.armed = v.now.Add(d), v.seq, true
	v.timers = append(v.timers, t)
	return was
}

// disarm takes t off the clock (v.mu held).
func (t *vtimer) disarm() {
	if !t.armed {
		return
	}
	t.armed = false
	ts := t.v.timers
	for i, x := range ts {
		if x == t {
			t.v.timers = append(ts[:i], ts[i+1:]...)
			break
		}
	}
}

// vbox is an actor's mailbox on the virtual scheduler.
type vbox struct {
	v    *virtual
	m    machine
	dead bool // stopped: nothing more is delivered
}

func (b *vbox) post(msg any) {
	b.v.mu.Lock()
	b.v.queue = append(b.v.queue, delivery{b, msg})
	b.v.mu.Unlock()
}

// poison stops the actor after the messages queued before.
func (b *vbox) poison() { b.post(poisonPill{}) }

// stop stops the actor before any other message (protoactor's Stop is a
// system message), at once unless a delivery is under way.
func (b *vbox) stop() {
	b.v.mu.Lock()
	b.v.queue = append([]delivery{{b, poisonPill{}}}, b.v.queue...)
	b.v.mu.Unlock()
	b.v.run()
}

type poisonPill struct{}

func (b *vbox) deliver(msg any) {
	if _, ok := msg.(poisonPill); ok {
		b.dead = true
		b.m.receive(stoppingMsg)
		b.m.receive(stoppedMsg)
		return
	}
	b.m.receive(msg)
}
