package actors

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRuntime(t *testing.T, idle time.Duration) *Runtime {
	t.Helper()
	srv := redistest.Start(t)
	rt := NewRuntime(srv.Client(t), Config{
		Watchdog:  5 * time.Second,
		IdleAfter: idle,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(rt.Close)
	return rt
}

// lockOnce takes and gives back one hold through the actor, failing the test
// if either step does not answer within a second.
func lockOnce(t *testing.T, rt *Runtime, name, owner string) {
	t.Helper()
	key := Key{Kind: KindLock, Name: name}
	req := messages.NewRequest()
	if err := rt.Send(key, &messages.Acquire{Owner: owner, Req: req}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-req.Done():
		if res := req.Result(); !res.Granted || res.Err != nil {
			t.Fatalf("%s: acquire = %+v", name, res)
		}
	case <-time.After(time.Second):
		t.Fatalf("%s: acquire not answered", name)
	}
	reply := make(chan messages.ReleaseResult, 1)
	if err := rt.Send(key, &messages.Release{Owner: owner, Reply: reply}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-reply:
		if res.NotHeld || res.Err != nil {
			t.Fatalf("%s: release = %+v", name, res)
		}
	case <-time.After(time.Second):
		t.Fatalf("%s: release not answered", name)
	}
}

func TestIdleActorsRetire(t *testing.T) {
	rt := newRuntime(t, 50*time.Millisecond)
	base := runtime.NumGoroutine()
	const names = 300
	peak := 0
	for i := 0; i < names; i++ {
		lockOnce(t, rt, fmt.Sprint("idle-", i), "owner:1")
		peak = max(peak, rt.Actors())
	}
	// Some retire while the loop still runs (it outlasts IdleAfter on a slow
	// machine), so only require that actors did pile up.
	if peak < 10 {
		t.Fatalf("at most %d actors registered while %d names were used", peak, names)
	}
	deadline := time.Now().Add(3 * time.Second)
	for rt.Actors() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d actors still registered after 3s idle", rt.Actors())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A retired name comes back on next use.
	lockOnce(t, rt, "idle-0", "owner:1")
	if g := runtime.NumGoroutine(); g > base+10 {
		t.Fatalf("%d goroutines after retirement, %d before", g, base)
	}
}

// TestRetireRacesSenders keeps actors retiring while callers keep sending: no
// message may be lost in a stopping mailbox.
func TestRetireRacesSenders(t *testing.T) {
	rt := newRuntime(t, time.Millisecond)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				lockOnce(t, rt, fmt.Sprint("race-", i%3), fmt.Sprint("owner:", g))
				time.Sleep(time.Duration(i%4) * 500 * time.Microsecond)
			}
		}()
	}
	wg.Wait()
}
