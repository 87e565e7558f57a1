package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

// scenarioCase runs one subcommand briefly and names lines its output must
// have.
type scenarioCase struct {
	name     string
	args     []string
	stdout   []string // each must appear in stdout
	timeline bool     // the subcommand takes --timeline
}

// scenarioCases keeps every subcommand short: the whole table runs in a few
// seconds per backend.
var scenarioCases = []scenarioCase{
	{"contention", []string{"contention", "--duration", "1s", "--seed", "7"},
		[]string{"mutual exclusion: OK (0 overlaps in", "seed 7", "redis commands", "per acquisition", "fairness", "wait"}, true},
	{"watchdog", []string{"watchdog", "--watchdog", "300ms"},
		[]string{"TryLock -> false", "long hold:", "crash:      lock taken over", "Lost() fired", "watchdog: OK"}, false},
	{"fair", []string{"fair", "--waiters", "4", "--hold", "30ms", "--seed", "3"},
		[]string{"requested: ", "granted:   ", "FIFO order: OK (grant order == request order)"}, true},
	{"rwlock", []string{"rwlock", "--duration", "1500ms", "--readers", "3"},
		[]string{"readers  ", "writer   ", "readers in parallel: up to", "writer alone: OK (0 of"}, true},
	{"semaphore", []string{"semaphore", "--duration", "1s"},
		[]string{"permits in use (limit 3)", "permits back at the end: 3 of 3", "never above the limit: OK"}, false},
	{"permits", []string{"permits", "--lease", "300ms"},
		[]string{"crashed holder's permits back: 3 of 3", "late release of a dead permit: ErrNotHeld", "leases enforced by Redis: OK"}, false},
	{"latch", []string{"latch", "--workers", "3", "--waiters", "2", "--seed", "5"},
		[]string{"worker 3 counts down", "waiter 2 goes on", "count at the end: 0", "waiters held until the last count-down: OK (0 of 2"}, false},
	{"fenced", []string{"fenced", "--lease", "200ms"},
		[]string{"REJECTED: stale fencing token", "storage holds: \"B's write\"", "stale token rejected: OK"}, false},
	{"spin", []string{"spin", "--waiters", "3", "--hold", "200ms", "--cap", "20ms"},
		[]string{"-> 0 while 3 waiters spin", "channel subscribers while waiting: 0", "most holders at once: 1", "spin without pub/sub: OK"}, false},
	{"redlock", []string{"redlock", "--hold", "50ms"},
		[]string{"all up         5", "minority down  3         acquired", "majority down  2         refused", "redlock (quorum 3): OK"}, true},
}

// TestScenariosEmbedded runs every subcommand on its embedded default, with
// a timeline where it takes one.
func TestScenariosEmbedded(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			file := filepath.Join(dir, tc.name+".html")
			if tc.timeline {
				args = append(args[:len(args):len(args)], "--timeline", file)
			}
			checkScenario(t, tc, args)
			if tc.timeline {
				checkTimelineFile(t, file)
			}
		})
	}
}

// TestScenariosRealRedis runs every subcommand against real redis-servers
// (redistest falls back to miniredis without redis-server on PATH unless
// LOCKACTOR_REQUIRE_REDIS=1).
func TestScenariosRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args[:len(tc.args):len(tc.args)], "--redis", "redis://"+srv.Addr())
			if tc.name == "redlock" {
				var urls []string
				for _, s := range redistest.StartN(t, 5) {
					urls = append(urls, "redis://"+s.Addr())
				}
				args = append(tc.args[:len(tc.args):len(tc.args)], "--nodes", strings.Join(urls, ","))
			}
			checkScenario(t, tc, args)
		})
	}
}

func checkScenario(t *testing.T, tc scenarioCase, args []string) {
	t.Helper()
	start := time.Now()
	code, stdout, stderr := runDemo(t, args...)
	t.Logf("%s took %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range tc.stdout {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("progress rewrote its line in place on a non-terminal:\n%q", stderr)
	}
}

func checkTimelineFile(t *testing.T, file string) {
	t.Helper()
	page, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!doctype html>", "<svg", "<rect", kindColor[spanHold]} {
		if !strings.Contains(string(page), want) {
			t.Errorf("%s lacks %q", file, want)
		}
	}
	for _, banned := range []string{"http://", "https://", "<script"} {
		if strings.Contains(string(page), banned) {
			t.Errorf("%s is not self-contained: it has %q", file, banned)
		}
	}
}

// TestJSON checks that --json prints one JSON object on stdout, with the
// verdict, and the narrative on stderr.
func TestJSON(t *testing.T) {
	for _, args := range [][]string{
		{"contention", "--duration", "500ms"},
		{"fair", "--waiters", "3", "--hold", "20ms"},
		{"fenced", "--lease", "150ms"},
		{"spin", "--hold", "100ms"},
		{"redlock", "--count", "3", "--hold", "20ms"},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, stdout, stderr := runDemo(t, append(args, "--json")...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			var res struct {
				Scenario string `json:"scenario"`
				OK       bool   `json:"ok"`
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
			}
			if res.Scenario != args[0] || !res.OK {
				t.Errorf("scenario %q ok %v, want %q true:\n%s", res.Scenario, res.OK, args[0], stdout)
			}
			if args[0] != "contention" && stderr == "" {
				t.Error("the narrative is missing from stderr")
			}
		})
	}
}
