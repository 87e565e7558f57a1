package actors

import (
	"errors"
	"testing"
	"time"
)

// TestForceBook covers the record of a Client's force unlocks that relays
// consult: which confirmations it trusts, and that it forgets names.
func TestForceBook(t *testing.T) {
	cases := []struct {
		name      string
		ends      []error // force unlocks of "x" that ended, in order, at t0 (nil: ok)
		under     int     // force unlocks of "x" still under way
		confirmed time.Duration
		want      bool
	}{
		{"no force unlock", nil, 0, -time.Second, true},
		{"one under way", nil, 1, time.Second, false},
		{"confirmed before the end", []error{nil}, 0, -time.Millisecond, false},
		{"confirmed at the end", []error{nil}, 0, 0, false},
		{"confirmed after the end", []error{nil}, 0, time.Millisecond, true},
		{"one ended, another under way", []error{nil}, 1, time.Millisecond, false},
		{"failed: confirmed soon after", []error{errors.New("timeout")}, 0, time.Second, false},
		{"failed: confirmed half a watchdog later", []error{errors.New("timeout")}, 0, 15*time.Second + time.Millisecond, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newVirtual()
			t0 := v.Now()
			rt := newRuntimeWith(Config{Watchdog: 30 * time.Second}, v, nil, nil)
			defer rt.cancel()
			for _, err := range c.ends {
				rt.Forcing("x")(err)
			}
			for range c.under {
				rt.Forcing("x")
			}
			if got := rt.forced.allows("x", t0.Add(c.confirmed)); got != c.want {
				t.Errorf("allows(x) = %v, want %v", got, c.want)
			}
			if !rt.forced.allows("y", t0) {
				t.Error("another name is held back")
			}
		})
	}
}

// TestForceBookForgets: a name whose force unlock ended a watchdog ago is
// forgotten at the next force unlock, so the book does not grow.
func TestForceBookForgets(t *testing.T) {
	v := newVirtual()
	rt := newRuntimeWith(Config{Watchdog: 30 * time.Second}, v, nil, nil)
	defer rt.cancel()
	rt.Forcing("a")(nil)
	under := rt.Forcing("b")
	v.advance(31 * time.Second)
	rt.Forcing("c")(nil)
	if got := rt.forced.size.Load(); got != 2 {
		t.Fatalf("%d names remembered, want 2 (b under way, c)", got)
	}
	under(nil)
}
