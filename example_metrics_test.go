package lockactor_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockactor/lockactor"
)

// A service that runs the OpenTelemetry SDK hands its meter provider to
// New; without WithMeterProvider the global provider is used (a no-op
// unless the service installed one). Here a manual reader stands in for
// the service's exporter.
func ExampleWithMeterProvider() {
	addr, stopRedis := newExampleRedis()
	defer stopRedis()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	// Shown from here.
	reader := sdkmetric.NewManualReader() // the service's exporter, in real life
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	client, err := lockactor.New(rdb, lockactor.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	lock := client.Lock("invoice:42")
	if err := lock.Lock(ctx); err == nil {
		_ = lock.Unlock(ctx)
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "lockactor.acquisitions" {
				fmt.Println(m.Name, sum.DataPoints[0].Value)
			}
		}
	}
	// Output: lockactor.acquisitions 1
}
