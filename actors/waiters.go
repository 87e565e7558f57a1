package actors

import "github.com/lockactor/lockactor/messages"

// waitQueue is the FIFO of local waiters of one lock. Withdrawn (or already
// answered) requests are not searched for: they are dropped when they reach
// the head, which keeps every operation O(1) amortised however many waiters
// give up.
type waitQueue struct {
	items []*messages.Acquire
	head  int
}

func (q *waitQueue) push(m *messages.Acquire) { q.items = append(q.items, m) }

// front is the oldest waiter still waiting, or nil.
func (q *waitQueue) front() *messages.Acquire {
	for q.head < len(q.items) {
		if m := q.items[q.head]; m.Req.Pending() {
			return m
		}
		q.pop()
	}
	return nil
}

// pop removes the head.
func (q *waitQueue) pop() {
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 64 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
}

// each calls fn for every waiter still waiting, oldest first; answered ones
// in the middle are left for front to drop.
func (q *waitQueue) each(fn func(*messages.Acquire)) {
	for _, m := range q.items[q.head:] {
		if m.Req.Pending() {
			fn(m)
		}
	}
}

// empty reports whether nobody is waiting (withdrawn requests do not count).
func (q *waitQueue) empty() bool { return q.front() == nil }

// drain removes every waiter, calling fn for each one still waiting.
func (q *waitQueue) drain(fn func(*messages.Acquire)) {
	for m := q.front(); m != nil; m = q.front() {
		q.pop()
		fn(m)
	}
}
