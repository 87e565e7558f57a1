// Package syncx holds helpers for package sync shared by the actors and
// redisio packages and the bench tool. It lives apart from redisio because
// waiting on a WaitGroup has nothing to do with Redis I/O.
package syncx

import (
	"sync"
	"time"
)

// WaitUntil waits for wg until deadline and reports whether its counter
// reached zero in time. When the deadline passes first, a goroutine stays
// blocked in wg.Wait until the counter does reach zero. A deadline already
// past may report false even when the counter is at zero.
func WaitUntil(wg *sync.WaitGroup, deadline time.Time) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Closed reports whether ch is closed, without waiting; a nil ch never is.
func Closed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
