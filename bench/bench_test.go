package main

import (
	"bytes"
	"encoding/json"
	"os"
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
