//go:build full

package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestSentinelGracefulFailoverKeepsLocks: master + replica + 3 sentinels,
// clients through go-redis's FailoverClient. A holder holds, a waiter on its
// own Client and one on another Client wait, SENTINEL FAILOVER promotes the
// (in-sync) replica. The hold must survive (no Lost, still in the new
// master's hash, nobody else granted), and the holder's Unlock must wake
// both waiters promptly: before, a waiter slept until its retry timer (up
// to the watchdog timeout) because its subscription stayed on the demoted
// master, and once the holder lost the lock to renewals that missed the new
// master.
//
// Two ways to end the failover: the rig's Failover also tells the old
// master to replicate at once; "sentinelPace" leaves that to the sentinels,
// which take 10-20 s, as in production: meanwhile the old master is an
// isolated master that still holds the waiters' subscriptions and hears
// none of the new master's messages.
func TestSentinelGracefulFailoverKeepsLocks(t *testing.T) {
	for _, tt := range []struct {
		name     string
		watchdog time.Duration
		paced    bool
		// through go-redis's NewFailoverClusterClient (a ClusterClient
		// over the Sentinel group), whose subscriptions also stayed on
		// the demoted master
		cluster bool
		long    bool // only with LOCKACTOR_TORTURE: CI's time goes to the others
	}{
		{"watchdog3s", 3 * time.Second, false, false, false},
		{"watchdogDefault", 0, false, false, true},
		{"watchdog3s/sentinelPace", 3 * time.Second, true, false, false},
		{"watchdogDefault/sentinelPace", 0, true, false, true},
		{"watchdogDefault/sentinelPace/clusterClient", 0, true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.long && os.Getenv(tortureEnv) == "" {
				t.Skip("a variant of the others; set " + tortureEnv + " to run it")
			}
			// Each case has its own deployment and mostly waits on its
			// sentinels: the cases share the machine well.
			t.Parallel()
			sen := redistest.StartSentinel(t)
			var opts []lockactor.Option
			if tt.watchdog > 0 {
				opts = append(opts, lockactor.WithWatchdogTimeout(tt.watchdog))
			}
			fc := func() redis.UniversalClient {
				if tt.cluster {
					return sen.FailoverClusterClient(t)
				}
				return sen.FailoverClient(t, nil)
			}
			home, other := newClient(t, fc(), opts...), newClient(t, fc(), opts...)
			ctx := ctxFor(t, 90*time.Second)
			const name = "sentinel-graceful"

			holder := home.Lock(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			type woke struct {
				side string
				err  error
			}
			// Waiters report through woken, never through t: they may
			// still wait when a failure ends the test.
			woken := make(chan woke, 2)
			waiters := map[string]*lockactor.Lock{"same-client": home.Lock(name), "other-client": other.Lock(name)}
			for side, w := range waiters {
				go func() { woken <- woke{side, w.Lock(ctx)} }()
			}
			time.Sleep(300 * time.Millisecond)

			var newMaster *redistest.Server
			if tt.paced {
				newMaster = promoteBySentinels(t, sen)
			} else {
				newMaster = sen.Failover(t)
			}
			// Watch the hold for a while after the promotion: at least two
			// renewal periods of the short watchdog.
			settle := time.After(2 * time.Second)
			if tt.watchdog > 0 {
				settle = time.After(2 * tt.watchdog)
			}
			select {
			case <-holder.Lost():
				t.Fatal("the holder's Lost closed across a graceful failover")
			case w := <-woken:
				t.Fatalf("the %s waiter returned while the holder held: %v", w.side, w.err)
			case <-settle:
			}
			field := lockactor.OwnerOf(holder)
			if n, err := newMaster.Client(t).HGet(ctx, name, field).Int(); err != nil || n != 1 {
				t.Fatalf("the new master's hash has %s = %d, %v; want the hold", field, n, err)
			}

			unlocked := time.Now()
			if err := holder.Unlock(ctx); err != nil {
				t.Fatalf("Unlock after the failover: %v", err)
			}
			for range waiters {
				select {
				case w := <-woken:
					side := w.side
					if w.err != nil {
						t.Fatalf("%s waiter: %v", side, w.err)
					}
					d := time.Since(unlocked)
					t.Logf("%s waiter woken %v after the unlock", side, d.Round(time.Millisecond))
					if d > 700*time.Millisecond {
						t.Errorf("the %s waiter slept %v on a free lock", side, d)
					}
					if err := waiters[side].Unlock(ctx); err != nil {
						t.Fatal(err)
					}
					unlocked = time.Now()
				case <-time.After(40 * time.Second):
					t.Fatal("a waiter was never woken after the failover")
				}
			}
		})
	}
}

// promoteBySentinels sends SENTINEL FAILOVER and waits only until the
// sentinels name the former replica as master and it says so; the old
// master is left for the sentinels to reconfigure in their own time.
func promoteBySentinels(t *testing.T, sen *redistest.Sentinel) *redistest.Server {
	t.Helper()
	old := sen.WaitStable(t)
	want := sen.Replica()
	ctx := ctxFor(t, 30*time.Second)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sen.Addrs()[0]})
	defer sc.Close()
	within(t, 20*time.Second, "SENTINEL FAILOVER accepted", func() bool { return sc.Failover(ctx, sen.MasterName()).Err() == nil })
	within(t, 20*time.Second, "the replica promoted", func() bool {
		return sen.Master() == want && strings.Contains(want.Client(t).Info(ctx, "replication").Val(), "role:master")
	})
	t.Logf("promoted %s; %s left to the sentinels", want.Addr(), old.Addr())
	return want
}

// TestSentinelFailoverLostHoldClosesLost: a hold that the promoted replica
// does not have (it diverged: the key was deleted on the replica only, as a
// lagging replica would lack it) is gone after the failover, and its
// holder's Lost must close rather than the watchdog pretending.
func TestSentinelFailoverLostHoldClosesLost(t *testing.T) {
	// Parallel: its own deployment, and bounds loose enough to share the machine.
	t.Parallel()
	sen := redistest.StartSentinel(t)
	c := newClient(t, sen.FailoverClient(t, nil), lockactor.WithWatchdogTimeout(3*time.Second))
	ctx := ctxFor(t, 60*time.Second)
	const name = "sentinel-vanished"
	l := c.Lock(name)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rep := sen.Replica().Client(t)
	if err := rep.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rep.Del(ctx, name).Err(); err != nil {
		t.Fatal(err)
	}
	sen.Failover(t)
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost did not close although the new master never had the hold")
	}
	if err := l.Unlock(ctx); !errors.Is(err, lockactor.ErrNotHeld) {
		t.Fatalf("Unlock of a vanished hold: %v, want ErrNotHeld", err)
	}
}

// TestCrashFailoverDoubleGrants: a replica that lags (its replication link
// frozen) while a lock is taken, then the master crashes and the replica is
// promoted. Without replica sync the first holder still believes it holds
// while a second owner is granted on the promoted replica: a double grant.
// With sync on, the unconfirmed grant is undone and reported
// (ErrNotReplicated), so no round may double-grant.
func TestCrashFailoverDoubleGrants(t *testing.T) {
	const rounds = 20
	for _, tt := range []struct {
		name string
		sync lockactor.Option
	}{
		{"syncOff", lockactor.WithReplicaSync(0, time.Second)},
		{"syncOn", lockactor.WithReplicaSync(-1, 100*time.Millisecond)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doubles := 0
			for i := range rounds {
				if crashRound(t, i, tt.sync) {
					doubles++
				}
			}
			t.Logf("%s: %d double grants in %d crash failovers", tt.name, doubles, rounds)
			switch {
			case tt.name == "syncOn" && doubles != 0:
				t.Fatalf("%d double grants with replica sync on", doubles)
			case tt.name == "syncOff" && doubles == 0:
				t.Fatal("no double grant with sync off: the scenario did not make the replica lag")
			}
		})
	}
}

// crashRound runs one induced crash failover and reports a double grant.
func crashRound(t *testing.T, i int, sync lockactor.Option) bool {
	t.Helper()
	pair := redistest.StartReplicatedLinked(t)
	defer pair.Stop()
	fast := func(o *redis.Options) { o.MaxRetries, o.DialTimeout = -1, 200*time.Millisecond }
	a := newClient(t, pair.Master().ClientWith(t, fast), sync)
	ctx := ctxFor(t, 10*time.Second)
	name := fmt.Sprint("crash-", i)

	pair.Link().Freeze(nil) // the replica sees nothing from now on
	first := a.Lock(name)
	ok, err := first.TryLock(ctx)
	switch {
	case err != nil && !errors.Is(err, lockactor.ErrNotReplicated):
		t.Fatalf("round %d: first TryLock: %v", i, err)
	case ok:
		// Give a would-be undo no chance to matter: the master dies now.
	}
	pair.Master().Kill(t)
	pair.Promote(t)
	b := newClient(t, pair.Replica().ClientWith(t, fast))
	second, err := b.Lock(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("round %d: TryLock on the promoted replica: %v", i, err)
	}
	firstHolds := ok
	if firstHolds {
		select {
		case <-first.Lost():
			firstHolds = false
		default:
		}
	}
	return firstHolds && second
}

// TestSentinelCloseBoundedOnHungMaster guards a past defect: with the
// master SIGSTOPped, Close took 4.3 s, because a Sentinel client's receive
// loop was inside its once-a-second check of which server commands reach
// (an INFO whose ctx go-redis ignores on socket reads) and PubSub.Close
// waited for it without a bound. Close must return within about CloseGrace
// and leave none of the package's goroutines behind, with the master still
// stopped. "Reconnecting": a short health check has the loop replace the
// silent connection while the master is stopped, so Close meets a
// reconnection under way (its handshake waits for a server that does not
// answer).
func TestSentinelCloseBoundedOnHungMaster(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []lockactor.Option
		// linger: how long a goroutine of ours may outlive Close, still
		// inside go-redis (its handshake ends with go-redis's 3 s read
		// timeout, and then touches nothing); 0: none may.
		linger time.Duration
	}{
		{"MasterCheck", nil, 0},
		{"Reconnecting", []lockactor.Option{lockactor.WithPubSubHealthCheck(200 * time.Millisecond)}, 5 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) { sentinelCloseOnHungMaster(t, tt.opts, tt.linger) })
	}
}

func sentinelCloseOnHungMaster(t *testing.T, opts []lockactor.Option, linger time.Duration) {
	sen := redistest.StartSentinel(t)
	// No renewal may fall due: the lock taken below would renew 10 s after
	// it (a third of the default watchdog), and on a loaded machine this
	// test can reach Close later than that, the renewal then stuck on the
	// stopped master, a command in flight that Close cannot end (this test
	// is about the subscription's own work).
	opts = append([]lockactor.Option{lockactor.WithWatchdogTimeout(time.Hour)}, opts...)
	c, err := lockactor.New(sen.FailoverClient(t, nil), opts...)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close()
		}
	}()
	ctx := ctxFor(t, 30*time.Second)
	const name = "sentinel-hung-close"
	if err := c.Lock(name).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A waiter subscribes: its connection's loop now checks the master
	// every second.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- c.Lock(name).Lock(wctx) }()
	master := sen.Master()
	mrdb := master.Client(t)
	// No failover while the master is stopped: the sentinels' switch would
	// close go-redis's connections to it, and with them the stuck read.
	if err := sen.Replica().Client(t).ConfigSet(ctx, "replica-priority", "0").Err(); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "the waiter subscribed", func() bool {
		return mrdb.PubSubNumSub(ctx, "redisson_lock__channel:{"+name+"}").Val()["redisson_lock__channel:{"+name+"}"] > 0
	})
	// The waiter tries once more when its subscription is confirmed; that
	// attempt must be answered before the master stops, or it is a
	// command in flight, inside go-redis, that Close cannot end (this
	// test is about the subscription's own work). Answered: no script
	// ran on the master for 300 ms.
	scriptsRun := func() int64 {
		info := mrdb.Info(ctx, "commandstats").Val()
		return infoCalls(info, "evalsha") + infoCalls(info, "eval")
	}
	within(t, 5*time.Second, "the waiter's attempts answered", func() bool {
		before := scriptsRun()
		time.Sleep(300 * time.Millisecond)
		return scriptsRun() == before
	})
	master.Pause(t)
	defer master.Resume(t)
	time.Sleep(1500 * time.Millisecond) // a check is under way on the stopped master

	start := time.Now()
	_ = c.Close()
	closed = true
	took := time.Since(start)
	t.Logf("Close took %v with the master stopped", took.Round(time.Millisecond))
	if took > 2500*time.Millisecond {
		t.Errorf("Close took %v with the master stopped; want about CloseGrace (1s)", took)
	}
	if err := <-waited; !errors.Is(err, lockactor.ErrClosed) {
		t.Errorf("the waiter got %v from Close, want ErrClosed", err)
	}
	// Nothing of ours may still run, even before the master resumes.
	deadline := time.Now().Add(linger + 100*time.Millisecond)
	for packageGoroutines() != "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := packageGoroutines(); left != "" {
		t.Errorf("goroutines of the package still running %v after Close:\n%s", linger, left)
	}
}

// packageGoroutines returns the stacks of running goroutines that have a
// frame in the module's code (tests and the test rig aside), or "".
func packageGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "packageGoroutines") {
			continue
		}
		for line := range strings.SplitSeq(g, "\n") {
			ours := strings.HasPrefix(line, "github.com/lockactor/lockactor") &&
				!strings.HasPrefix(line, "github.com/lockactor/lockactor/internal/redistest")
			if ours && !strings.Contains(line, "_test.") {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

// infoCalls reads the calls of one command from an INFO commandstats reply.
func infoCalls(info, command string) int64 {
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+command+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}
