package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockactor/lockactor"
)

// demoMetrics is an OpenTelemetry SDK meter provider read in-process by a
// manual reader: what a service's exporter would send to its dashboards.
type demoMetrics struct {
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newDemoMetrics() *demoMetrics {
	reader := sdkmetric.NewManualReader()
	return &demoMetrics{mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), reader: reader}
}

// option sends a Client's metrics here.
func (d *demoMetrics) option() lockactor.Option { return lockactor.WithMeterProvider(d.mp) }

func (d *demoMetrics) close() { _ = d.mp.Shutdown(context.Background()) }

// metricsSnapshot is one collection of the lockactor.* metrics, by name.
type metricsSnapshot struct {
	byName map[string]metricdata.Metrics
	err    error
}

// collect reads the metrics of every Client using d.
func (d *demoMetrics) collect(ctx context.Context) metricsSnapshot {
	var rm metricdata.ResourceMetrics
	if err := d.reader.Collect(context.WithoutCancel(ctx), &rm); err != nil {
		return metricsSnapshot{err: err}
	}
	s := metricsSnapshot{byName: make(map[string]metricdata.Metrics)}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			s.byName[m.Name] = m
		}
	}
	return s
}

// sum adds up the counter name's points whose attribute key has value
// ("" key: every point).
func (s metricsSnapshot) sum(name, key, value string) int64 {
	d, _ := s.byName[name].Data.(metricdata.Sum[int64])
	var n int64
	for _, p := range d.DataPoints {
		if v, ok := p.Attributes.Value(attribute.Key(key)); key == "" || ok && v.AsString() == value {
			n += p.Value
		}
	}
	return n
}

// histogram is the point of histogram name with exactly kv.
func (s metricsSnapshot) histogram(name string, kv ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	want := attribute.NewSet(kv...)
	d, _ := s.byName[name].Data.(metricdata.Histogram[float64])
	for _, p := range d.DataPoints {
		if p.Attributes.Equals(&want) {
			return p
		}
	}
	return metricdata.HistogramDataPoint[float64]{}
}

// print writes a few of the metrics, as a dashboard would show them.
func (s metricsSnapshot) print(w io.Writer) {
	if s.err != nil {
		fmt.Fprintf(w, "metrics: %v\n", s.err)
		return
	}
	const acq = "lockactor.acquisitions"
	fmt.Fprintln(w, "OpenTelemetry metrics (all instances, read through the SDK's manual reader):")
	var outcomes []string
	for _, o := range []string{"acquired", "not_acquired", "canceled", "error"} {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", o, s.sum(acq, "outcome", o)))
	}
	fmt.Fprintf(w, "  %-24s %s\n", acq, strings.Join(outcomes, ", "))
	kind, ok := attribute.String("kind", "lock"), attribute.String("outcome", "acquired")
	wait, hold := s.histogram("lockactor.wait.duration", kind, ok), s.histogram("lockactor.hold.duration", kind)
	fmt.Fprintf(w, "  %-24s p50 ~%s  p99 ~%s (from the histogram's buckets)\n", "lockactor.wait.duration",
		seconds2ms(quantile(wait, 0.5)), seconds2ms(quantile(wait, 0.99)))
	fmt.Fprintf(w, "  %-24s p50 ~%s  p99 ~%s\n", "lockactor.hold.duration",
		seconds2ms(quantile(hold, 0.5)), seconds2ms(quantile(hold, 0.99)))
	fmt.Fprintf(w, "  %-24s %d (releases that gave the lock straight to a waiter of the same instance)\n",
		"lockactor.handoffs", s.sum("lockactor.handoffs", "", ""))
	fmt.Fprintf(w, "  %-24s %d (lockactor.redis.errors %d, lockactor.renewals %d)\n", "lockactor.lost",
		s.sum("lockactor.lost", "", ""), s.sum("lockactor.redis.errors", "", ""), s.sum("lockactor.renewals", "", ""))
}

// quantile estimates the q-quantile of p from its buckets as Prometheus's
// histogram_quantile does: linearly within the bucket that holds the rank;
// the top bucket (above the last bound) answers the recorded maximum.
func quantile(p metricdata.HistogramDataPoint[float64], q float64) float64 {
	rank := q * float64(p.Count)
	var below uint64
	for i, n := range p.BucketCounts {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		if i == len(p.Bounds) {
			top, _ := p.Max.Value()
			return top
		}
		lo := 0.0
		if i > 0 {
			lo = p.Bounds[i-1]
		}
		return lo + (p.Bounds[i]-lo)*(rank-float64(below))/float64(n)
	}
	return 0
}

// seconds2ms formats seconds in milliseconds.
func seconds2ms(s float64) string { return fmt.Sprintf("%.2fms", s*1000) }
