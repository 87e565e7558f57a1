package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain lets the test binary serve as a multiproc worker too.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		os.Exit(childMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func needRedis(t *testing.T) {
	if _, err := os.Stat(redisBin); err != nil {
		if os.Getenv("LOCKACTOR_REQUIRE_REDIS") == "1" {
			t.Fatalf("%s: %v", redisBin, err)
		}
		t.Skipf("%s not installed", redisBin)
	}
}

// TestQuickContended runs the tool's --quick mode on the contended scenario
// with every library and checks the JSON report: a sample per library, no
// errors, acquisitions made, no overlap, and no goroutine left behind.
func TestQuickContended(t *testing.T) {
	needRedis(t)
	defer goleak.VerifyNone(t)
	var out, errb bytes.Buffer
	if code := run([]string{"--quick", "--scenarios", "contended", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	libs := map[string]bool{}
	for _, s := range rep.Samples {
		libs[s.Lib] = true
		if s.Err != "" {
			t.Errorf("%s: %s", s.Lib, s.Err)
			continue
		}
		m := s.Metrics
		if m["acq_s"] <= 0 || m["violations"] != 0 || m["errors"] != 0 || m["stuck"] != 0 {
			t.Errorf("%s %s: %v", s.Title, s.Lib, m)
		}
	}
	for _, name := range []string{"raw", "lockactor", "redsync-default", "redsync-tuned", "redislock"} {
		if !libs[name] {
			t.Errorf("no sample for %s", name)
		}
	}
	var md bytes.Buffer
	if err := rep.writeMarkdown(&md); err != nil || !strings.Contains(md.String(), "| lockactor |") {
		t.Errorf("markdown (%v):\n%s", err, md.String())
	}
}

// TestHistQuantiles checks the histogram's resolution and JSON round trip.
func TestHistQuantiles(t *testing.T) {
	h := &hist{}
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back hist
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		got := back.quantile(c.q)
		if d := got - c.want; d < -c.want/25 || d > c.want/25 {
			t.Errorf("q%.2f = %v, want %v within 4%%", c.q, got, c.want)
		}
	}
}

// TestQuickFrozen runs the frozen scenario in --quick mode: a 3-master
// Cluster, master 0 stopped for --freeze. The other masters' holds must
// stay held and their workers see no error; master 0's workers time out.
func TestQuickFrozen(t *testing.T) {
	needRedis(t)
	defer goleak.VerifyNone(t)
	var out, errb bytes.Buffer
	if code := run([]string{"--quick", "--scenarios", "frozen", "--libs", "lockactor", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	if len(rep.Samples) != 1 || rep.Samples[0].Lib != "lockactor" || rep.Samples[0].Err != "" {
		t.Fatalf("samples: %+v", rep.Samples)
	}
	m := rep.Samples[0].Metrics
	if m["base_acq_s"] <= 0 || m["frozen_acq_s"] <= 0 || m["lost_healthy"] != 0 || m["errors_healthy"] != 0 ||
		m["violations"] != 0 || m["stuck"] != 0 || m["errors_m0"] == 0 {
		t.Errorf("metrics: %v", m)
	}
}

// TestDeploymentFlags checks --latency and --pin parsing: off by default,
// a negative latency refused.
func TestDeploymentFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		latency time.Duration
		pin     bool
		err     bool
	}{
		{args: nil},
		{args: []string{"--latency", "200us", "--pin"}, latency: 200 * time.Microsecond, pin: true},
		{args: []string{"--pin=false", "--latency=1ms"}, latency: time.Millisecond},
		{args: []string{"--latency", "-1s"}, err: true},
		{args: []string{"--latency", "soon"}, err: true},
	} {
		s, err := parseFlags(c.args, io.Discard)
		if (err != nil) != c.err {
			t.Errorf("%q: error %v, want error %v", c.args, err, c.err)
			continue
		}
		if !c.err && (s.Latency != c.latency || s.Pin != c.pin) {
			t.Errorf("%q: latency %v pin %v, want %v %v", c.args, s.Latency, s.Pin, c.latency, c.pin)
		}
	}
}

// TestSplitCPUs checks --pin's placement: the first allowed CPU for
// redis-server, the rest for the clients, an error with only one.
func TestSplitCPUs(t *testing.T) {
	if _, _, err := splitCPUs([]int{0}); err == nil || !strings.Contains(err.Error(), "at least 2 CPUs") {
		t.Errorf("one CPU: %v", err)
	}
	server, clients, err := splitCPUs([]int{2, 3, 5, 6, 7})
	if err != nil || !slices.Equal(server, []int{2}) || !slices.Equal(clients, []int{3, 5, 6, 7}) {
		t.Errorf("got %v %v %v", server, clients, err)
	}
	if got := cpuList(clients); got != "3,5-7" {
		t.Errorf("cpuList = %q", got)
	}
	cmd := redisExe{path: "/bin/redis", taskset: "/bin/taskset", cpus: cpuList(server)}.command([]string{"--port", "1"})
	if want := []string{"/bin/taskset", "-c", "2", "/bin/redis", "--port", "1"}; !slices.Equal(cmd.Args, want) {
		t.Errorf("command %q, want %q", cmd.Args, want)
	}
}

// TestDeploymentString checks the configuration line of the report header.
func TestDeploymentString(t *testing.T) {
	if got := (deployment{GOMAXPROCS: 2}).String(); got != "loopback" {
		t.Errorf("default: %q", got)
	}
	got := deployment{Latency: 200 * time.Microsecond, ServerCPUs: []int{0}, ClientCPUs: []int{1}, GOMAXPROCS: 1}.String()
	for _, want := range []string{"redis-server on CPU 0, clients on CPU 1 (GOMAXPROCS 1)", "+200µs one-way latency on every client connection"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

// TestLatencyRoundTrip checks that --latency delays a benchmarked client's
// round trip by twice the one-way delay, a sub-millisecond one too (not
// the whole milliseconds of an idle process's timers), and leaves no
// goroutine behind.
func TestLatencyRoundTrip(t *testing.T) {
	needRedis(t)
	defer goleak.VerifyNone(t)
	if clientDialer(0) != nil {
		t.Error("latency 0 must keep go-redis's own dialer")
	}
	srv, err := startServer(redisExe{path: redisBin})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	for _, c := range []struct{ latency, most time.Duration }{
		{5 * time.Millisecond, time.Second},
		{300 * time.Microsecond, 1800 * time.Microsecond}, // 1.1 ms timers would make >= 2.2 ms
	} {
		rt, err := pingRT(srv.addr, c.latency)
		if err != nil {
			t.Fatal(err)
		}
		if rt < 2*c.latency || rt > c.most {
			t.Errorf("latency %v: median round trip %v, want %v to %v", c.latency, rt, 2*c.latency, c.most)
		}
	}
}
