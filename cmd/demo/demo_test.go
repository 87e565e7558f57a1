package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// After dial failures (redlock's stopped nodes, the unreachable
		// server tests) go-redis runs a tryDial goroutine that can outlive
		// the client's Close by about a second.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
	)
}

// runDemo runs the CLI's entry point with args.
func runDemo(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = run(args, &out, &errs)
	return code, out.String(), errs.String()
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in the first line of stderr
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"bad value", []string{"--procs", "many"}, `invalid value "many" for flag -procs`},
		{"zero procs", []string{"--procs", "0"}, "--procs must be at least 1"},
		{"zero keys", []string{"contention", "--keys", "0"}, "--keys must be at least 1"},
		{"negative duration", []string{"--duration", "-1s"}, "--duration must be positive"},
		{"negative hold", []string{"--hold", "-1ms"}, "--hold must not be negative"},
		{"extra argument", []string{"contention", "extra"}, `unexpected argument "extra"`},
		{"bad URL", []string{"--redis", "http://x"}, "invalid URL scheme"},
		{"unknown subcommand", []string{"bogus"}, `unknown subcommand "bogus"`},
		{"help on unknown", []string{"help", "bogus"}, `unknown subcommand "bogus"`},
		{"watchdog zero", []string{"watchdog", "--watchdog", "0s"}, "--watchdog must be positive"},
		{"fair one waiter", []string{"fair", "--waiters", "1"}, "--waiters must be at least 2"},
		{"rwlock no readers", []string{"rwlock", "--readers", "0"}, "--readers must be at least 1"},
		{"rwlock zero duration", []string{"rwlock", "--duration", "0s"}, "--duration must be positive"},
		{"semaphore no permits", []string{"semaphore", "--permits", "0"}, "--permits must be at least 1"},
		{"fenced negative lease", []string{"fenced", "--lease", "-1s"}, "--lease must be positive"},
		{"spin no waiters", []string{"spin", "--waiters", "0"}, "--waiters must be at least 1"},
		{"spin zero cap", []string{"spin", "--cap", "0s"}, "--cap must be positive"},
		{"redlock two nodes", []string{"redlock", "--nodes", "redis://127.0.0.1:1,redis://127.0.0.1:2"}, "--nodes needs at least 3 URLs"},
		{"redlock bad node URL", []string{"redlock", "--nodes", "redis://a:1,http://b,redis://c:3"}, "invalid URL scheme"},
		{"redlock takes no --redis", []string{"redlock", "--redis", "redis://127.0.0.1:1"}, "flag provided but not defined: -redis"},
		{"watchdog takes no --timeline", []string{"watchdog", "--timeline", "x.html"}, "flag provided but not defined: -timeline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runDemo(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2\nstderr:\n%s", code, stderr)
			}
			first, _, _ := strings.Cut(stderr, "\n")
			if !strings.Contains(first, tc.want) || !strings.Contains(stderr, "usage: demo") {
				t.Errorf("stderr's first line lacks %q, or the usage is missing:\n%s", tc.want, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := runDemo(t, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, c := range commands {
		if !strings.Contains(stdout, "  "+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, stdout)
		}
	}

	code, _, stderr := runDemo(t, "-h")
	if code != 0 || !strings.Contains(stderr, "-goroutines") || !strings.Contains(stderr, "redlock") {
		t.Errorf("-h: exit %d, want 0 with the subcommands and contention's flags:\n%s", code, stderr)
	}

	code, stdout, _ = runDemo(t, "help", "fair")
	if code != 0 || !strings.Contains(stdout, "usage: demo fair") || !strings.Contains(stdout, "-waiters") {
		t.Errorf("help fair: exit %d:\n%s", code, stdout)
	}

	for _, c := range commands {
		code, _, stderr := runDemo(t, c.name, "-h")
		if code != 0 || !strings.Contains(stderr, "usage: demo "+c.name) || !strings.Contains(stderr, "-json") {
			t.Errorf("%s -h: exit %d, want 0 with its usage:\n%s", c.name, code, stderr)
		}
	}
}

func TestUnreachableRedis(t *testing.T) {
	for _, args := range [][]string{
		{"--redis", "redis://127.0.0.1:1"},
		{"fair", "--redis", "redis://127.0.0.1:1"},
		{"redlock", "--nodes", "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			start := time.Now()
			code, _, stderr := runDemo(t, args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "cannot reach Redis at 127.0.0.1:1") {
				t.Errorf("stderr does not name the address:\n%s", stderr)
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", lines, stderr)
			}
			if d := time.Since(start); d > pingTimeout+time.Second {
				t.Errorf("took %v, want about %v at most", d, pingTimeout)
			}
		})
	}
}

func TestOverlaps(t *testing.T) {
	ms := time.Millisecond
	sp := func(start, end time.Duration, owner int) span { return span{start: start, end: end, owner: owner} }
	for _, tc := range []struct {
		name string
		log  []span
		want int
	}{
		{"empty", nil, 0},
		{"disjoint, unsorted", []span{sp(4*ms, 5*ms, 1), sp(0, 1*ms, 0), sp(2*ms, 3*ms, 2)}, 0},
		{"touching", []span{sp(0, 1*ms, 0), sp(1*ms, 2*ms, 1)}, 0},
		{"overlap", []span{sp(0, 2*ms, 0), sp(1*ms, 3*ms, 1)}, 1},
		{"one long span covers two", []span{sp(0, 10*ms, 0), sp(2*ms, 3*ms, 1), sp(5*ms, 6*ms, 2)}, 2},
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
	r.print(&out, &contention{procs: 1, goroutines: 2, keys: 1}, &env{})
	for _, want := range []string{"mutual exclusion: VIOLATED (1 overlaps in 10 critical sections", "first overlap: k: i0/g0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, &out)
		}
	}
}

func TestMaxInsideAndSamples(t *testing.T) {
	ms := time.Millisecond
	holds := []interval{
		{asked: 0, start: 0, end: 10 * ms},
		{asked: 0, start: 5 * ms, end: 15 * ms},
		{asked: 0, start: 10 * ms, end: 20 * ms}, // touches the first: not inside together
		{asked: 12 * ms, start: 30 * ms, end: 40 * ms, exclusive: true},
	}
	if got := maxInside(holds[:3]); got != 2 {
		t.Errorf("maxInside = %d, want 2", got)
	}
	s := samples(holds, 40*ms, 4) // snapshots at 5, 15, 25, 35 ms
	want := []sample{{Inside: 2, Waiting: 1}, {Inside: 1, Waiting: 1}, {Waiting: 1}, {Exclusive: 1}}
	for i := range want {
		want[i].At = s[i].At
	}
	if !slices.Equal(s, want) {
		t.Errorf("samples = %+v, want %+v", s, want)
	}
}
