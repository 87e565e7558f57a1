package lockactor

import (
	"sync"

	"github.com/lockactor/lockactor/messages"
)

// lostBox keeps what Lost returns for one handle (a Lock, a Mutex, a
// MultiLock or a RedLock): the current hold's channel, or, while nothing is
// held, the channel the next hold will close. A caller that takes Lost
// before Lock (lost := l.Lost(); l.Lock(ctx)) so watches the hold it is
// about to get: the acquire carries that channel to the actor, which makes
// it the new hold's own (messages.Acquire.Lost).
type lostBox struct {
	mu   sync.Mutex
	cur  chan struct{}      // the current hold's; nil while nothing is held
	next *messages.LostChan // for the next hold from zero; made on demand
}

// get is Lost: the current hold's channel, or the next hold's.
func (b *lostBox) get() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur != nil {
		return b.cur
	}
	return b.nextLocked().C
}

// forNext is the channel an acquire brings for a hold from zero holds (a
// reentrant grant keeps its hold's own).
func (b *lostBox) forNext() *messages.LostChan {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nextLocked()
}

// nextLocked is the next hold's channel. One that a hold claimed which is
// not the current one (a grant given back as its caller's ctx ended) is
// that hold's, and may close: the next hold gets a fresh one.
func (b *lostBox) nextLocked() *messages.LostChan {
	if b.next == nil || (b.next.Claimed() && b.next.C != b.cur) {
		b.next = messages.NewLostChan()
	}
	return b.next
}

// share makes b's next hold close the same channel as other's next hold
// (a Mutex's handles share the mutex's).
func (b *lostBox) share(other *lostBox) {
	next := other.forNext()
	b.mu.Lock()
	b.next = next
	b.mu.Unlock()
}

// held records a grant whose hold closes lost; it reports whether that is a
// hold from zero holds (not the current hold again).
func (b *lostBox) held(lost chan struct{}) (fresh bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fresh = lost != b.cur
	b.cur = lost
	if b.next != nil && lost == b.next.C {
		b.next = nil
	}
	return fresh
}

// free records that nothing is held any more: the next Lost is the next
// hold's.
func (b *lostBox) free() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur = nil
}

// current is the current hold's channel, nil while nothing is held.
func (b *lostBox) current() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur
}
