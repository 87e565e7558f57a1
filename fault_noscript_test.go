//go:build full

package lockactor_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

// TestScriptCacheLostUnderLoad: a server whose script cache empties while
// calls are in flight (a Sentinel or Cluster switch to a replica that never
// loaded them, SCRIPT FLUSH, a restart) answers NOSCRIPT. The runtime loads
// the script and sends the call again, however many times the cache empties
// meanwhile: no caller ever sees NOSCRIPT. Here another connection flushes
// the cache in a tight loop while 64 goroutines of two Clients take and
// give back locks, fenced locks and permits on a few names, so that
// pipelines carry several scripts at once and a flush lands between a
// pipeline's EVAL (which loads a script) and its later EVALSHAs.
func TestScriptCacheLostUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := ctxFor(t, 60*time.Second)
	stop := make(chan struct{})
	var flushes atomic.Int64
	var flusher sync.WaitGroup
	flusher.Add(1)
	go func() {
		defer flusher.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if admin.ScriptFlush(ctx).Err() == nil {
				flushes.Add(1)
			}
		}
	}()
	var (
		wg     sync.WaitGroup
		ops    atomic.Int64
		mu     sync.Mutex
		errs   []string
		report = func(what string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if len(errs) < 5 {
				errs = append(errs, fmt.Sprintf("%s: %v", what, err))
			}
		}
	)
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; i < 2; i++ {
		c := newClient(t, srv.Client(t))
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; time.Now().Before(deadline); n++ {
					name := fmt.Sprintf("ns%d", (g+n)%8)
					var err error
					switch n % 3 {
					case 0:
						l := c.Lock(name)
						if err = l.Lock(ctx); err == nil {
							err = l.Unlock(ctx)
						}
					case 1:
						l := c.FencedLock(name + "f")
						if err = l.Lock(ctx); err == nil {
							err = l.Unlock(ctx)
						}
					case 2:
						s := c.PermitSemaphore(name + "p")
						if _, err = s.TrySetPermits(ctx, 4); err == nil {
							var id string
							if id, err = s.Acquire(ctx, 5*time.Second); err == nil {
								err = s.Release(ctx, id)
							}
						}
					}
					if err != nil {
						report(name, err)
						return
					}
					ops.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	flusher.Wait()
	t.Logf("%d operations, %d SCRIPT FLUSHes", ops.Load(), flushes.Load())
	for _, e := range errs {
		if strings.Contains(e, "NOSCRIPT") {
			t.Errorf("a caller saw NOSCRIPT: %s", e)
		} else {
			t.Errorf("error: %s", e)
		}
	}
	if flushes.Load() < 100 {
		t.Fatalf("only %d flushes: the test did not exercise the path", flushes.Load())
	}
	if ops.Load() < 100 {
		t.Fatalf("only %d operations", ops.Load())
	}
}
