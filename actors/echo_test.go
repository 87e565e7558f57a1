package actors

import (
	"testing"
	"time"
)

// TestEchoBook covers how a lock actor counts and times its releases'
// echoes: events are applied in order, each at its offset from the start.
func TestEchoBook(t *testing.T) {
	type event struct {
		at   time.Duration
		what string // "pub": a release replied; "msg": a message heard; "busy": heard while a request is in flight; "reply", "resync"
	}
	cases := []struct {
		name    string
		events  []event
		check   time.Duration // when behind is asked
		awaited int
		behind  bool
	}{
		{"nothing published", nil, time.Second, 0, false},
		{"an echo due, on time so far", []event{{0, "pub"}}, echoLag, 1, false},
		{"an echo overdue", []event{{0, "pub"}}, echoLag + 1, 1, true},
		{"an echo on time", []event{{0, "pub"}, {echoLag, "msg"}}, time.Minute, 0, false},
		{"an echo late", []event{{0, "pub"}, {echoLag + 1, "msg"}}, time.Minute, 0, true},
		{"a late echo, then one on time", []event{{0, "pub"}, {echoLag + 1, "msg"}, {time.Second, "pub"}, {time.Second + 1, "msg"}}, time.Minute, 0, false},
		{"an echo before its reply", []event{{0, "busy"}, {1, "pub"}, {2, "reply"}}, time.Minute, 0, false},
		{"an echo before its reply clears a late channel", []event{{0, "pub"}, {echoLag + 1, "msg"}, {time.Second, "busy"}, {time.Second, "pub"}, {time.Second, "reply"}}, time.Minute, 0, false},
		{"a message during a request, the echoes it answers first", []event{{0, "pub"}, {1, "busy"}, {2, "pub"}, {3, "reply"}}, 4, 1, false},
		{"a message heard during another request is no echo", []event{{0, "busy"}, {1, "reply"}, {2, "pub"}}, echoLag + 3, 1, true},
		{"an echo never heard is given up late", []event{{0, "pub"}, {echoForget + 1, "pub"}}, echoForget + 2, 1, true},
		{"a resubscription forgets the echoes due", []event{{0, "pub"}, {1, "resync"}}, time.Minute, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			var e echoBook
			for _, ev := range c.events {
				now := t0.Add(ev.at)
				switch ev.what {
				case "pub":
					e.published(now)
				case "msg":
					e.heard(1, now, false)
				case "busy":
					e.heard(1, now, true)
				case "reply":
					e.replied()
				case "resync":
					e.resync()
				}
			}
			if got := e.awaited(); got != c.awaited {
				t.Errorf("awaited = %d, want %d", got, c.awaited)
			}
			if got := e.behind(t0.Add(c.check)); got != c.behind {
				t.Errorf("behind = %v, want %v", got, c.behind)
			}
		})
	}
}
