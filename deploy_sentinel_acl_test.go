//go:build full

package lockactor_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestSentinelFollowsWhenROLEIsDenied: a Client whose ACL user may not run
// ROLE follows a failover on go-redis's sentinel's word alone. The runtime
// asks a server its ROLE before it takes it for the new master; a NOPERM
// answer must count as "ask the sentinel" rather than "not a master", or
// the Client would never follow a switch: no hold re-read on the new
// master, and (while go-redis's pool lags) no routing there. The hold taken
// before the failover must survive it, the switch must be logged with the
// new master's address, and the lock must still exclude another Client
// (with every permission) and pass to it on Unlock.
func TestSentinelFollowsWhenROLEIsDenied(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinel(t)
	ctx := ctxFor(t, 90*time.Second)
	for _, s := range sen.Servers() { // ACLs are per server: the new master needs the user too
		if err := s.Client(t).Do(ctx, "acl", "setuser", "norole", "on", ">pw", "~*", "&*", "+@all", "-role").Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb := sen.FailoverClient(t, func(o *redis.FailoverOptions) { o.Username, o.Password = "norole", "pw" })
	if err := rdb.Do(ctx, "ROLE").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("ROLE as the test's user: %v; want NOPERM", err)
	}
	var buf syncBuffer
	const watchdog = 3 * time.Second
	c := newClient(t, rdb, lockactor.WithWatchdogTimeout(watchdog),
		lockactor.WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	other := newClient(t, sen.FailoverClient(t, nil))
	const name = "sentinel-norole"

	holder := c.Lock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	newMaster := sen.Failover(t)
	followed := "to=" + newMaster.Addr()
	within(t, 15*time.Second, "the Client following the switch ("+followed+")", func() bool {
		return strings.Contains(buf.String(), "master switched") && strings.Contains(buf.String(), followed)
	})
	select {
	case <-holder.Lost():
		t.Fatalf("the holder's Lost closed across a graceful failover; log:\n%s", buf.String())
	case <-time.After(2 * watchdog): // two renewal periods and more
	}
	field := lockactor.OwnerOf(holder)
	if n, err := newMaster.Client(t).HGet(ctx, name, field).Int(); err != nil || n != 1 {
		t.Fatalf("the new master's hash has %s = %d, %v; want the hold", field, n, err)
	}
	if ok, err := other.Lock(name).TryLock(ctx); ok || err != nil {
		t.Fatalf("another Client's TryLock while held: %v, %v; want refused", ok, err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the failover: %v", err)
	}
	if ok, err := other.Lock(name).TryLock(ctx); !ok || err != nil {
		t.Fatalf("another Client's TryLock after the Unlock: %v, %v; want granted", ok, err)
	}
	if strings.Contains(buf.String(), "level=ERROR") {
		t.Fatalf("errors logged:\n%s", buf.String())
	}
	t.Logf("log:\n%s", buf.String())
}
