package actors

import (
	"github.com/lockactor/lockactor/internal/syncx"
	"github.com/lockactor/lockactor/redisio"
)

// The rows' checks: what the callers were answered, what Redis holds, what
// the actor listens on (see harness_test.go).

// answered checks that label has been answered (advancing the clock timer
// by timer, up to waitFor, until it is) and that the answer reads want
// (see describe).
func answered(label, want string) step {
	return func(h *harness) {
		var got string
		ok := h.until(waitFor, func() bool {
			var ok bool
			got, ok = h.answer(label)
			return ok
		})
		switch {
		case !ok:
			h.t.Fatalf("%s: no answer within %v, want %q", label, waitFor, want)
		case got != want:
			h.t.Fatalf("%s answered %q, want %q", label, got, want)
		}
	}
}

// unanswered checks that label has had no answer yet.
func unanswered(label string) step {
	return func(h *harness) {
		if got, ok := h.answer(label); ok {
			h.t.Fatalf("%s answered %q, want no answer yet", label, got)
		}
	}
}

// lostClosed checks whether the Lost channel label's grant carried is
// closed.
func lostClosed(label string, want bool) step {
	return func(h *harness) {
		req := h.acq[label]
		if req == nil {
			h.t.Fatalf("no acquire %q", label)
		}
		if got := syncx.Closed(req.Result().Lost); got != want {
			h.t.Fatalf("%s: Lost closed: %v, want %v", label, got, want)
		}
	}
}

// permits checks the semaphore's count in Redis.
func permits(n int) step {
	return func(h *harness) {
		if got := h.st.count(); got != n {
			h.t.Fatalf("the semaphore counts %d permits in Redis, want %d", got, n)
		}
	}
}

// listening checks whether the actor is subscribed to channel.
func listening(channel string, want bool) step {
	return func(h *harness) {
		h.poll(0, func() bool { return h.ps.listening(channel) == want }, "subscribed to %s: %v, want %v", channel, !want, want)
	}
}

// answer is label's answer, if it has one.
func (h *harness) answer(label string) (string, bool) {
	if s, ok := h.heard[label]; ok {
		return s, true
	}
	var s string
	switch {
	case h.acq[label] != nil:
		if _, ok := recv(h.acq[label].Done()); !ok {
			return "", false
		}
		r := h.acq[label].Result()
		s = describe(r.Granted, false, false, r.Err, "refused")
	case h.rel[label] != nil:
		r, ok := recv(h.rel[label].Reply)
		if !ok {
			return "", false
		}
		s = describe(false, r.Gone, r.NotHeld, r.Err, "ok")
	case h.ext[label] != nil:
		r, ok := recv(h.ext[label].Reply)
		if !ok {
			return "", false
		}
		s = describe(r.OK, false, false, r.Err, "refused")
		if r.Watchdog {
			s = "watchdog"
		}
	case h.adj[label] != nil:
		r, ok := recv(h.adj[label].Reply)
		if !ok {
			return "", false
		}
		s = describe(false, false, false, r.Err, "ok") // a CountDown, or a TrySetCount that set nothing
		if r.Err == nil && r.Set {
			s = "set"
		}
	default:
		h.t.Fatalf("no caller %q", label)
	}
	h.heard[label] = s
	return s, true
}

// recv takes a value from ch if one is there.
func recv[T any](ch <-chan T) (v T, ok bool) {
	select {
	case v = <-ch:
		return v, true
	default:
		return v, false
	}
}

// describe reads an answer as the rows write it: "granted", "gone",
// "notheld", "err: <message>", or otherwise: "refused" (an acquire) or
// "ok" (a release that left holds, permits given back).
func describe(granted, gone, notHeld bool, err error, otherwise string) string {
	switch {
	case err != nil:
		return "err: " + err.Error()
	case granted:
		return "granted"
	case gone:
		return "gone"
	case notHeld:
		return "notheld"
	}
	return otherwise
}

// failed is how an answer carrying err reads.
func failed(err error) string { return "err: " + err.Error() }

// fairChannel is the fair-lock channel of own on the rows' lock.
func fairChannel(own string) string { return redisio.FairChannel("x", "c:"+own) }
