package lockactor_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/lockactor/lockactor"
)

// The public API the package promises, signature by signature: this file
// stops compiling if a listed name is renamed, dropped or changes shape.
var (
	_ func(redis.UniversalClient, ...lockactor.Option) (*lockactor.Client, error) = lockactor.New
	_ func(*lockactor.Client) error                                               = (*lockactor.Client).Close
	_ func(*lockactor.Client) string                                              = (*lockactor.Client).ID
	_ func(time.Duration) lockactor.Option                                        = lockactor.WithWatchdogTimeout
	_ func(*slog.Logger) lockactor.Option                                         = lockactor.WithLogger
	_ func(int, time.Duration) lockactor.Option                                   = lockactor.WithReplicaSync
	_ func(metric.MeterProvider) lockactor.Option                                 = lockactor.WithMeterProvider

	_ func(*lockactor.Client, string) *lockactor.Lock          = (*lockactor.Client).Lock
	_ func(*lockactor.Client, string) *lockactor.Lock          = (*lockactor.Client).FairLock
	_ func(*lockactor.Client, string) *lockactor.Lock          = (*lockactor.Client).FencedLock
	_ func(*lockactor.Client, string) *lockactor.ReadWriteLock = (*lockactor.Client).ReadWriteLock
	_ func(*lockactor.ReadWriteLock) *lockactor.Lock           = (*lockactor.ReadWriteLock).ReadLock
	_ func(*lockactor.ReadWriteLock) *lockactor.Lock           = (*lockactor.ReadWriteLock).WriteLock

	_ func(time.Duration) lockactor.LockOption = lockactor.WithLease
	_ func(time.Duration) lockactor.LockOption = lockactor.WithWait

	_ lockactor.Locker = (*lockactor.Lock)(nil)
	_ lockactor.Locker = (*lockactor.MultiLock)(nil)
	_ lockactor.Locker = (*lockactor.RedLock)(nil)

	_ func(*lockactor.Lock) string                                                  = (*lockactor.Lock).Name
	_ func(*lockactor.Lock, context.Context, ...lockactor.LockOption) error         = (*lockactor.Lock).Lock
	_ func(*lockactor.Lock, context.Context, ...lockactor.LockOption) (bool, error) = (*lockactor.Lock).TryLock
	_ func(*lockactor.Lock, context.Context) error                                  = (*lockactor.Lock).Unlock
	_ func(*lockactor.Lock, context.Context, time.Duration) error                   = (*lockactor.Lock).Extend
	_ func(*lockactor.Lock, context.Context) (bool, error)                          = (*lockactor.Lock).ForceUnlock
	_ func(*lockactor.Lock, context.Context) (bool, error)                          = (*lockactor.Lock).IsLocked
	_ func(*lockactor.Lock, context.Context) (bool, error)                          = (*lockactor.Lock).IsHeldByMe
	_ func(*lockactor.Lock, context.Context) (int, error)                           = (*lockactor.Lock).HoldCount
	_ func(*lockactor.Lock, context.Context) (time.Duration, error)                 = (*lockactor.Lock).RemainingLease
	_ func(*lockactor.Lock) <-chan struct{}                                         = (*lockactor.Lock).Lost
	_ func(*lockactor.Lock) uint64                                                  = (*lockactor.Lock).Token

	_ func(*lockactor.Client, string) *lockactor.Semaphore                          = (*lockactor.Client).Semaphore
	_ func(*lockactor.Semaphore) string                                             = (*lockactor.Semaphore).Name
	_ func(*lockactor.Semaphore, context.Context, int) (bool, error)                = (*lockactor.Semaphore).TrySetPermits
	_ func(*lockactor.Semaphore, context.Context, int) error                        = (*lockactor.Semaphore).AddPermits
	_ func(*lockactor.Semaphore, context.Context) (int, error)                      = (*lockactor.Semaphore).AvailablePermits
	_ func(*lockactor.Semaphore, context.Context, int) error                        = (*lockactor.Semaphore).Acquire
	_ func(*lockactor.Semaphore, context.Context, int, time.Duration) (bool, error) = (*lockactor.Semaphore).TryAcquire
	_ func(*lockactor.Semaphore, context.Context, int) error                        = (*lockactor.Semaphore).Release

	_ func(...*lockactor.Lock) *lockactor.MultiLock = lockactor.NewMultiLock
	_ func(...*lockactor.Lock) *lockactor.RedLock   = lockactor.NewRedLock
	_ func(*lockactor.RedLock) time.Duration        = (*lockactor.RedLock).Validity

	_ error = &lockactor.MemberError{Name: "", Err: nil}

	_ = []error{lockactor.ErrNotHeld, lockactor.ErrClosed, lockactor.ErrInvalidArgument, lockactor.ErrNoQuorum, lockactor.ErrNotReplicated}
)
