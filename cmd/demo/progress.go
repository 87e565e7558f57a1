package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Progress intervals: in place on a terminal, one line per second otherwise
// (a log file or a pipe should not fill with carriage returns).
const (
	progressTTY   = 200 * time.Millisecond
	progressLines = time.Second
)

// isTerminal reports whether w is a character device, i.e. a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startProgress reports a's progress on w (acquisitions, rate, waiters,
// elapsed) until the returned stop is called; stop returns once the
// reporting goroutine has exited. On a terminal the line is rewritten in
// place; elsewhere one plain line is printed per second.
func startProgress(w io.Writer, a *arena) (stop func()) {
	tty := isTerminal(w)
	every := progressLines
	if tty {
		every = progressTTY
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		lastN, lastT := int64(0), a.epoch
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintln(w) // keep the last in-place line
				}
				return
			case now := <-t.C:
				n := a.acquired.Load()
				rate := float64(n-lastN) / now.Sub(lastT).Seconds()
				line := fmt.Sprintf("  %5.1fs  acquisitions %8d  rate %7.0f/s  waiters %3d  double entries %d",
					now.Sub(a.epoch).Seconds(), n, rate, a.waiting.Load(), a.doubles.Load())
				if tty {
					fmt.Fprintf(w, "\r%s\x1b[K", line)
				} else {
					fmt.Fprintln(w, line)
				}
				lastN, lastT = n, now
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
