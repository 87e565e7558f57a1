package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRunEmbedded runs the whole demo against the embedded miniredis.
func TestRunEmbedded(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"--duration", "1s", "--seed", "7"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	out := stdout.String()
	for _, want := range []string{"mutual exclusion: OK", "acquisitions", "seed 7"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "mutual exclusion: OK (0 overlaps in 0 critical sections)") {
		t.Errorf("no critical section ran:\n%s", out)
	}
	if !strings.Contains(stderr.String(), "contention:") {
		t.Errorf("stderr lacks the start line:\n%s", &stderr)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"bad value", []string{"--procs", "many"}, `invalid value "many" for flag -procs`},
		{"zero procs", []string{"--procs", "0"}, "--procs must be at least 1"},
		{"zero keys", []string{"--keys", "0"}, "--keys must be at least 1"},
		{"negative duration", []string{"--duration", "-1s"}, "--duration must be positive"},
		{"negative hold", []string{"--hold", "-1ms"}, "--hold must not be negative"},
		{"extra argument", []string{"contention"}, `unexpected argument "contention"`},
		{"bad URL", []string{"--redis", "http://x"}, "invalid URL scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2\nstderr:\n%s", code, &stderr)
			}
			msg := stderr.String()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "usage: demo") {
				t.Errorf("stderr lacks %q or the usage:\n%s", tc.want, msg)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty:\n%s", &stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	if !strings.Contains(stderr.String(), "-goroutines") {
		t.Errorf("usage lacks the flags:\n%s", &stderr)
	}
}

func TestUnreachableRedis(t *testing.T) {
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"--redis", "redis://127.0.0.1:1"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstderr:\n%s", code, &stderr)
	}
	msg := stderr.String()
	if !strings.Contains(msg, "127.0.0.1:1") {
		t.Errorf("stderr does not name the address:\n%s", msg)
	}
	if lines := strings.Count(strings.TrimSpace(msg), "\n") + 1; lines != 1 {
		t.Errorf("stderr has %d lines, want 1:\n%s", lines, msg)
	}
	if d := time.Since(start); d > pingTimeout+time.Second {
		t.Errorf("took %v, want about %v at most", d, pingTimeout)
	}
}

func TestOverlaps(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		log  []span
		want int
	}{
		{"empty", nil, 0},
		{"disjoint, unsorted", []span{{4 * ms, 5 * ms, 1}, {0, 1 * ms, 0}, {2 * ms, 3 * ms, 2}}, 0},
		{"touching", []span{{0, 1 * ms, 0}, {1 * ms, 2 * ms, 1}}, 0},
		{"overlap", []span{{0, 2 * ms, 0}, {1 * ms, 3 * ms, 1}}, 1},
		{"one long span covers two", []span{{0, 10 * ms, 0}, {2 * ms, 3 * ms, 1}, {5 * ms, 6 * ms, 2}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, prev, next := overlaps(tc.log)
			if n != tc.want {
				t.Fatalf("overlaps = %d, want %d", n, tc.want)
			}
			if n > 0 && (next.start >= prev.end || prev.owner == next.owner) {
				t.Errorf("first pair %+v, %+v does not overlap", prev, next)
			}
		})
	}
}

// TestPrintVerdict checks the summary of a run that found an overlap, which
// a working lock never produces.
func TestPrintVerdict(t *testing.T) {
	r := results{
		elapsed: time.Second, sections: 10, perWorker: []int{4, 6}, perProc: []int{10},
		waits: []time.Duration{time.Millisecond}, overlaps: 1, example: "k: i0/g0 held [0s, 2ms], i0/g1 entered at 1ms",
	}
	if !r.violated() {
		t.Fatal("violated() = false with an overlap")
	}
	var out bytes.Buffer
	r.print(&out, &env{cfg: config{procs: 1, goroutines: 2, keys: 1}, backend: "test"}, false)
	for _, want := range []string{"mutual exclusion: VIOLATED (1 overlaps in 10 critical sections", "first overlap: k: i0/g0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, &out)
		}
	}
}
