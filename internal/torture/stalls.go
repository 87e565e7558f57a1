package torture

import (
	"sync"
	"time"
)

// A stall is a span in which the test process's own timers ran late: a
// sleeper due to wake at Due woke at Woke. The runtime under test closes a
// hold's Lost from a timer of the same process, so no deadline that falls
// in a stall can be kept better than the process keeps its timers (on two
// shared cores, a failover's full resync and the race detector can hold
// every goroutine of the test back for a tenth of a second).
type Stall struct {
	Due, Woke time.Time
}

// Late is how late the sleeper woke.
func (s Stall) Late() time.Duration { return s.Woke.Sub(s.Due) }

// covers reports whether a timer due at t may have fired as late as the
// stall's Woke: t falls after the sleeper's last wake before it.
func (s Stall) covers(t time.Time) bool {
	return !t.Before(s.Due.Add(-stallTick)) && !t.After(s.Woke)
}

const (
	stallTick = 5 * time.Millisecond  // how often the meter's sleeper wakes
	stallMin  = 20 * time.Millisecond // how late a wake must be to count
)

// stallMeter records the stalls of the process while a run lasts.
type stallMeter struct {
	stop, done chan struct{}
	mu         sync.Mutex
	stalls     []Stall
}

// meterStalls starts a meter; end stops it and returns what it saw.
func meterStalls() *stallMeter {
	m := &stallMeter{stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *stallMeter) run() {
	defer close(m.done)
	t := time.NewTimer(stallTick)
	defer t.Stop()
	due := time.Now().Add(stallTick)
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			woke := time.Now()
			if woke.Sub(due) > stallMin {
				m.mu.Lock()
				m.stalls = append(m.stalls, Stall{Due: due, Woke: woke})
				m.mu.Unlock()
			}
			due = woke.Add(stallTick)
			t.Reset(stallTick)
		}
	}
}

func (m *stallMeter) end() []Stall {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stalls
}

// stalledUntil is the latest Woke of the stalls that cover t (zero if
// none): a timer due at t may have fired then.
func stalledUntil(stalls []Stall, t time.Time) time.Time {
	var until time.Time
	for _, s := range stalls {
		if s.covers(t) && s.Woke.After(until) {
			until = s.Woke
		}
	}
	return until
}
