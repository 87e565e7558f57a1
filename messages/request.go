package messages

import (
	"sync/atomic"
	"time"
)

// Result is an actor's answer to an Acquire.
type Result struct {
	Granted bool          // the hold was taken
	TTL     time.Duration // not granted: the holder's remaining lease
	Lost    chan struct{} // granted: closed if this hold is later found gone
	Token   uint64        // granted by a fenced lock: the hold's fencing token
	Field   string        // granted: the owner Redis keeps the hold under, when not the caller's (a relayed hold)
	Upgrade bool          // refused: a read holder asked for the write lock
	Err     error         // a Redis error; the hold was not taken
	Parts   []Result      // a group's grant: each member's, in member order
}

// Request states: an actor answers a pending request, or the caller abandons
// it, never both.
const (
	pending int32 = iota
	answered
	abandoned
)

// Request is the meeting point of one acquire call: the caller waits on Done,
// the actor answers through Answer. Whoever moves it out of pending first wins,
// which is how a grant that races with a cancelled ctx is detected by both sides.
type Request struct {
	state atomic.Int32
	// done is closed once res is set. A channel of struct{} costs one
	// allocation; a buffered channel of Result (which holds pointers) costs
	// two, on every Lock.
	done chan struct{}
	res  Result
	then func(Result)
}

// NewRequest returns a pending request.
func NewRequest() *Request { return &Request{done: make(chan struct{})} }

// NewRequestThen returns a pending request whose answer is also handed to
// then, on the answering actor's goroutine: how an actor that asks other
// actors (a group coordinator) gets their answers as messages. then must
// not block.
func NewRequestThen(then func(Result)) *Request {
	return &Request{done: make(chan struct{}), then: then}
}

// Done is closed once the answer is in; Result then returns it.
func (r *Request) Done() <-chan struct{} { return r.done }

// Result is the answer, once Done is closed (the zero Result before).
func (r *Request) Result() Result {
	select {
	case <-r.done:
		return r.res
	default:
		return Result{}
	}
}

// Answer delivers res unless the caller has abandoned the request. false means
// the caller is gone: a granted hold must be given back by the actor.
func (r *Request) Answer(res Result) bool {
	if !r.state.CompareAndSwap(pending, answered) {
		return false
	}
	r.res = res
	close(r.done)
	if r.then != nil {
		r.then(res)
	}
	return true
}

// Abandon withdraws the request. false means an answer was already given and
// is waiting behind Done.
func (r *Request) Abandon() bool { return r.state.CompareAndSwap(pending, abandoned) }

// Pending reports whether the request still awaits an answer.
func (r *Request) Pending() bool { return r.state.Load() == pending }
