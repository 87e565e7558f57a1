package actors

import "github.com/lockactor/lockactor/messages"

// waitQueue is the FIFO of local waiters of one lock: a doubly linked list
// indexed by request, so a waiter that withdraws leaves in O(1) and its
// memory goes with it, however far from the head it stands.
type waitQueue struct {
	head, tail *waiter
	at         map[*messages.Request]*waiter
	reads      int // queued waiters of messages.Read mode
	// spare is the node of the last waiter removed, wiped, for the next
	// push: a steady flow of callers, each queued and granted in turn,
	// then allocates no node. Only the queue refers to its nodes, and
	// nothing pushes while each or drain walks them.
	spare *waiter
}

type waiter struct {
	m          *messages.Acquire
	prev, next *waiter
}

func (q *waitQueue) push(m *messages.Acquire) {
	if q.at == nil {
		q.at = make(map[*messages.Request]*waiter)
	}
	w := q.spare
	if w == nil {
		w = &waiter{}
	}
	q.spare = nil
	w.m, w.prev = m, q.tail
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
	q.at[m.Req] = w
	if m.Mode == messages.Read {
		q.reads++
	}
}

// remove takes req's waiter out of the queue; false if it was not queued.
func (q *waitQueue) remove(req *messages.Request) bool {
	w := q.at[req]
	if w == nil {
		return false
	}
	delete(q.at, req)
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	if w.m.Mode == messages.Read {
		q.reads--
	}
	w.prev, w.next, w.m = nil, nil, nil
	q.spare = w
	return true
}

// front is the oldest waiter still waiting, or nil. Requests answered or
// withdrawn meanwhile are dropped on the way.
func (q *waitQueue) front() *messages.Acquire {
	for q.head != nil {
		if m := q.head.m; m.Req.Pending() {
			return m
		}
		q.remove(q.head.m.Req)
	}
	return nil
}

// each calls fn for every waiter still waiting, oldest first, until fn
// returns false.
func (q *waitQueue) each(fn func(*messages.Acquire) bool) {
	for w := q.head; w != nil; {
		next := w.next
		if w.m.Req.Pending() && !fn(w.m) {
			return
		}
		w = next
	}
}

// len is the number of waiters queued (a withdrawn one until its Abandon
// arrives or the head passes it).
func (q *waitQueue) len() int { return len(q.at) }

// empty reports whether nobody is waiting (withdrawn requests do not count).
func (q *waitQueue) empty() bool { return q.front() == nil }

// drain removes every waiter, calling fn for each one still waiting.
func (q *waitQueue) drain(fn func(*messages.Acquire)) {
	for m := q.front(); m != nil; m = q.front() {
		q.remove(m.Req)
		fn(m)
	}
	q.at = nil
}
