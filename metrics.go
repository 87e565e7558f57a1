package lockactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/lockactor/lockactor/actors"
)

// The metrics: caller-side numbers (acquisitions, wait and hold time) are
// recorded here as a call starts and ends; actor-side ones (renewals, lost
// holds, hand-offs, Redis errors) reach metrics as the actors.Observer of
// the Client's runtime; the queue lengths and the number of lock actors are
// read from the runtime (Runtime.Census) when the reader collects. Each
// attribute set is built once per Client, so recording allocates nothing
// (unless WithMetricsLockNames is on).

// meterName is the instrumentation scope of every instrument.
const meterName = "github.com/lockactor/lockactor"

// The attribute keys.
const (
	attrKind     = "kind"
	attrOutcome  = "outcome"
	attrOp       = "op"
	attrLockName = "lock.name" // only with WithMetricsLockNames
)

// kind is the primitive a call concerns: the kind attribute of the
// caller-side metrics (kindMetricNames) and the noun its errors start with
// (kindNouns, errors.go).
type kind uint8

const (
	kindLock kind = iota
	kindFair
	kindFenced
	kindRead
	kindWrite
	kindSemaphore
	kindPermit
	kindMulti
	kindRed
	kindLatch
	kindSpin
	kindMutex
	numKinds
)

var kindMetricNames = [numKinds]string{"lock", "fair", "fenced", "read", "write", "semaphore", "permit", "multilock", "redlock", "latch", "spin", "mutex"}

// outcome is how an acquisition call ended.
type outcome uint8

const (
	acquired    outcome = iota
	notAcquired         // TryLock or TryAcquire refused, or its wait ran out
	failed              // a Redis error, Close, an impossible upgrade
	canceled            // the caller's ctx ended first
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"acquired", "not_acquired", "error", "canceled"}

// The kind attribute of the actor-side metrics: the actor's kind, a group
// coordinator's split into multilock and redlock.
const numActorKinds = actors.NumKinds + 1

var actorKindNames = [numActorKinds]string{
	actors.KindLock: "lock", actors.KindFenced: "fenced", actors.KindFair: "fair",
	actors.KindRW: "rwlock", actors.KindSemaphore: "semaphore",
	actors.KindPermit: "permit", actors.KindCountDown: "latch", actors.KindSpin: "spin",
	actors.KindGroup: "multilock", actors.NumKinds: "redlock",
}

func actorKind(key actors.Key) int {
	if actors.IsRedLock(key) {
		return actors.NumKinds
	}
	return int(key.Kind)
}

var (
	renewNames = [actors.NumRenewOutcomes]string{actors.RenewOK: "ok", actors.RenewGone: "gone", actors.RenewError: "error"}
	opNames    = [actors.NumRedisOps]string{
		actors.OpAcquire: "acquire", actors.OpRelease: "release", actors.OpRenew: "renew",
		actors.OpCancel: "cancel", actors.OpAdjust: "adjust",
	}
)

// series is one attribute set with the options that carry it, built once.
type series struct {
	set attribute.Set
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newSeries(kv ...attribute.KeyValue) series {
	set := attribute.NewSet(kv...)
	o := metric.WithAttributeSet(set)
	return series{set: set, add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// metrics is a Client's instruments. It is the actors.Observer of the
// Client's runtime.
type metrics struct {
	names bool // WithMetricsLockNames
	meter metric.Meter
	rt    *actors.Runtime
	reg   metric.Registration // the callback of the observable instruments

	acquisitions, renewals, lost, redisErrors, handoffs metric.Int64Counter
	wait, hold                                          metric.Float64Histogram
	actors, waiters                                     metric.Int64ObservableUpDownCounter

	calls  [numKinds][numOutcomes]series
	holds  [numKinds]series
	kinds  [numActorKinds]series
	renews [numActorKinds][actors.NumRenewOutcomes]series
	errs   [numActorKinds][actors.NumRedisOps]series
}

var _ actors.Observer = (*metrics)(nil)

// Bucket boundaries, in seconds: a local Redis answers in about 0.1 ms,
// and holds last from a millisecond to minutes.
var (
	waitBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
)

// newMetrics creates the instruments on o's meter provider (the global one
// by default). If the provider refuses one, the error is logged once and
// the Client records nothing.
func newMetrics(o options) *metrics {
	mp := o.meterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := &metrics{names: o.metricNames, meter: mp.Meter(meterName)}
	if err := m.instruments(); err != nil {
		o.logger.Warn("lockactor: metrics disabled", "err", fmt.Errorf("creating instruments: %w", err))
		m.meter = noop.NewMeterProvider().Meter(meterName)
		_ = m.instruments()
	}
	for k := range numKinds {
		kind := attribute.String(attrKind, kindMetricNames[k])
		m.holds[k] = newSeries(kind)
		for oc := range numOutcomes {
			m.calls[k][oc] = newSeries(kind, attribute.String(attrOutcome, outcomeNames[oc]))
		}
	}
	for k := range numActorKinds {
		kind := attribute.String(attrKind, actorKindNames[k])
		m.kinds[k] = newSeries(kind)
		for oc := range actors.NumRenewOutcomes {
			m.renews[k][oc] = newSeries(kind, attribute.String(attrOutcome, renewNames[oc]))
		}
		for op := range actors.NumRedisOps {
			m.errs[k][op] = newSeries(kind, attribute.String(attrOp, opNames[op]))
		}
	}
	return m
}

// instruments creates every instrument on m's meter.
func (m *metrics) instruments() error {
	meter := m.meter
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		g, err := meter.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	m.acquisitions = counter("lockactor.acquisitions", "{acquisition}", "Acquisition calls, by kind and outcome.")
	m.wait = histogram("lockactor.wait.duration", "Time from an acquisition call to its answer.", waitBuckets)
	m.hold = histogram("lockactor.hold.duration", "Time from the grant of a hold to the Unlock that released it.", holdBuckets)
	m.renewals = counter("lockactor.renewals", "{renewal}", "Watchdog and RedLock renewals of holds, by outcome.")
	m.lost = counter("lockactor.lost", "{hold}", "Holds found gone before their Unlock (Lost closed).")
	m.redisErrors = counter("lockactor.redis.errors", "{error}", "Redis commands of the lock actors that failed, by operation.")
	m.handoffs = counter("lockactor.handoffs", "{handoff}", "Releases that gave the lock straight to the next local waiter.")
	m.actors = gauge("lockactor.actors", "{actor}", "Lock actors alive.")
	m.waiters = gauge("lockactor.waiters", "{waiter}", "Callers queued in lock actors.")
	return errors.Join(errs...)
}

// watch registers the observable instruments' callback on rt; unwatch
// (at Close) removes it.
func (m *metrics) watch(rt *actors.Runtime, log *slog.Logger) {
	m.rt = rt
	reg, err := m.meter.RegisterCallback(m.observe, m.actors, m.waiters)
	if err != nil {
		log.Warn("lockactor: metrics lockactor.actors and lockactor.waiters disabled", "err", fmt.Errorf("registering their callback: %w", err))
		return
	}
	m.reg = reg
}

func (m *metrics) unwatch() {
	if m.reg != nil {
		_ = m.reg.Unregister()
	}
}

// observe reports the lock actors alive and their queued callers: per kind
// (every kind, zeros included), or per lock with WithMetricsLockNames.
func (m *metrics) observe(_ context.Context, o metric.Observer) error {
	if m.names {
		m.rt.Census(func(key actors.Key, waiters int64) {
			s := m.named(&m.kinds[actorKind(key)], key.Name)
			o.ObserveInt64(m.actors, 1, s.obs...)
			o.ObserveInt64(m.waiters, waiters, s.obs...)
		})
		return nil
	}
	var alive, queued [numActorKinds]int64
	m.rt.Census(func(key actors.Key, waiters int64) {
		alive[actorKind(key)]++
		queued[actorKind(key)] += waiters
	})
	for k := range numActorKinds {
		o.ObserveInt64(m.actors, alive[k], m.kinds[k].obs...)
		o.ObserveInt64(m.waiters, queued[k], m.kinds[k].obs...)
	}
	return nil
}

// named is s, or with WithMetricsLockNames s plus the lock name (built per
// call).
func (m *metrics) named(s *series, name string) *series {
	if !m.names {
		return s
	}
	n := newSeries(append(s.set.ToSlice(), attribute.String(attrLockName, name))...)
	return &n
}

// acquisition records one acquisition call that began at start and ended
// with (ok, err), ctx being the call's.
func (m *metrics) acquisition(ctx context.Context, k kind, name string, start time.Time, ok bool, err error) {
	s := m.named(&m.calls[k][outcomeOf(ctx, ok, err)], name)
	ctx = live(ctx)
	m.acquisitions.Add(ctx, 1, s.add...)
	m.wait.Record(ctx, time.Since(start).Seconds(), s.rec...)
}

func outcomeOf(ctx context.Context, ok bool, err error) outcome {
	switch {
	case err == nil && ok:
		return acquired
	case err == nil:
		return notAcquired
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return canceled
	}
	return failed
}

// held records a hold granted at since and released at end; a zero since
// (not known) records nothing.
func (m *metrics) held(ctx context.Context, k kind, name string, since, end time.Time) {
	if since.IsZero() {
		return
	}
	m.hold.Record(live(ctx), end.Sub(since).Seconds(), m.named(&m.holds[k], name).rec...)
}

// live is ctx for recording: the SDK drops measurements made with a
// context that has ended, and a canceled call is one to count.
func live(ctx context.Context) context.Context {
	if ctx.Err() != nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// Renewed counts a renewal (actors.Observer).
func (m *metrics) Renewed(key actors.Key, oc actors.RenewOutcome) {
	m.renewals.Add(context.Background(), 1, m.named(&m.renews[actorKind(key)][oc], key.Name).add...)
}

// Lost counts a lost hold (actors.Observer).
func (m *metrics) Lost(key actors.Key) {
	m.lost.Add(context.Background(), 1, m.named(&m.kinds[actorKind(key)], key.Name).add...)
}

// HandedOff counts a hand-off (actors.Observer).
func (m *metrics) HandedOff(key actors.Key) {
	m.handoffs.Add(context.Background(), 1, m.named(&m.kinds[actorKind(key)], key.Name).add...)
}

// RedisError counts a failed command (actors.Observer).
func (m *metrics) RedisError(key actors.Key, op actors.RedisOp, _ error) {
	m.redisErrors.Add(context.Background(), 1, m.named(&m.errs[actorKind(key)][op], key.Name).add...)
}
