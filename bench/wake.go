package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The delay lines wait on Go timers, and a Go process with nothing to run
// sleeps in epoll_wait, whose timeout is whole milliseconds: a 200µs timer
// of an idle process fires after about 1.1 ms. --latency would then add
// over 2 ms a round trip instead of 400µs. A waker fixes that without
// spinning: for each chunk that enters a delay line it arms a timerfd,
// which sits in the runtime's netpoller, for the moment the chunk is due;
// the wake-up makes the runtime run its timers, the delay line's among them.

// waker wakes the runtime at every time it is given, in order.
type waker struct {
	mu      sync.Mutex
	due     []time.Time // ascending
	running bool        // a goroutine is waiting on the timerfd
	err     error       // the timerfd failed: no more waking, the delays go coarse
	tfd     *os.File    // nil until first needed
	fd      int         // tfd's descriptor (tfd.Fd would make it blocking)
}

// theWaker serves every delayed connection of this process.
var theWaker waker

// wakingDelay is a delay line's delay function that returns d and has the
// runtime woken when the chunk it is asked for falls due.
func wakingDelay(d time.Duration) func() time.Duration {
	return func() time.Duration {
		theWaker.at(d)
		return d
	}
}

// ready makes the timerfd now, so that a system without one fails the run
// at its start rather than leaving the delays coarse.
func (w *waker) ready() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.open()
}

// at schedules a wake-up d from now. The delay line took its own now just
// before, so the wake-up comes no earlier than its chunk is due; with one d
// for all, the times arrive in ascending order under mu.
func (w *waker) at(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.open() != nil {
		return
	}
	w.due = append(w.due, time.Now().Add(d))
	if !w.running {
		w.running = true
		go w.run()
	}
}

// open makes the timerfd (non-blocking, so that reading it parks the
// goroutine in the netpoller) the first time; w.mu is held.
func (w *waker) open() error {
	if w.tfd != nil {
		return nil
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		w.err = fmt.Errorf("timerfd_create: %w", err)
		return w.err
	}
	w.tfd, w.fd = os.NewFile(uintptr(fd), "timerfd"), fd
	return nil
}

// run waits for the earliest time still ahead until none is left, then
// ends (at starts it again), so no goroutine outlives the traffic.
func (w *waker) run() {
	for {
		next, ok := w.next()
		if !ok {
			return
		}
		if err := w.sleepUntil(next); err != nil {
			w.mu.Lock()
			w.err, w.due, w.running = err, nil, false
			w.mu.Unlock()
			return
		}
	}
}

// next drops the times that have passed and returns the earliest left;
// with none left it marks the waker stopped.
func (w *waker) next() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	i := 0
	for i < len(w.due) && !w.due[i].After(now) {
		i++
	}
	w.due = append(w.due[:0], w.due[i:]...)
	if len(w.due) == 0 {
		w.running = false
		return time.Time{}, false
	}
	return w.due[0], true
}

// sleepUntil arms the timerfd for t and reads it: the goroutine waits in
// the netpoller, which wakes the runtime on time.
func (w *waker) sleepUntil(t time.Time) error {
	ns := max(time.Until(t).Nanoseconds(), 1) // 0 would disarm it
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(ns)}
	if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	var buf [8]byte
	if _, err := w.tfd.Read(buf[:]); err != nil {
		return fmt.Errorf("timerfd read: %w", err)
	}
	return nil
}
