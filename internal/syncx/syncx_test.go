package syncx

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWaitUntil: true as soon as the counter reaches zero before the
// deadline, false once the deadline passes first.
func TestWaitUntil(t *testing.T) {
	tests := []struct {
		name     string
		doneIn   time.Duration // when the one Add is matched by Done; <0: no Add
		deadline time.Duration // from the call
		want     bool
		within   time.Duration // the call returns before this
	}{
		{"nothing to wait for", -1, time.Second, true, 500 * time.Millisecond},
		{"done before the deadline", 20 * time.Millisecond, 5 * time.Second, true, 2 * time.Second},
		{"deadline first", time.Second, 50 * time.Millisecond, false, 800 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wg sync.WaitGroup
			release := make(chan struct{})
			if tt.doneIn >= 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					select {
					case <-time.After(tt.doneIn):
					case <-release:
					}
				}()
			}
			start := time.Now()
			got := WaitUntil(&wg, start.Add(tt.deadline))
			took := time.Since(start)
			close(release) // no goroutine outlives the test
			wg.Wait()
			if got != tt.want {
				t.Errorf("WaitUntil = %v, want %v", got, tt.want)
			}
			if took >= tt.within {
				t.Errorf("WaitUntil took %v, want under %v", took, tt.within)
			}
		})
	}
}
