package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

func TestFencedTokensStrictlyIncrease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	var locks []*lockactor.Lock
	for i := 0; i < 3; i++ {
		locks = append(locks, newClient(t, srv.Client(t)).FencedLock("fenced"))
	}
	var last uint64
	for turn := 0; turn < 30; turn++ {
		l := locks[turn%3]
		if l.Token() != 0 {
			t.Fatalf("turn %d: Token before Lock = %d, want 0", turn, l.Token())
		}
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		tok := l.Token()
		if tok <= last {
			t.Fatalf("turn %d: token %d after %d", turn, tok, last)
		}
		if err := l.Lock(ctx); err != nil { // reentry keeps the token
			t.Fatal(err)
		}
		if l.Token() != tok {
			t.Fatalf("turn %d: reentrant hold changed the token %d -> %d", turn, tok, l.Token())
		}
		_ = l.Unlock(ctx)
		if l.Token() != tok {
			t.Fatal("token gone while a hold remains")
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if l.Token() != 0 {
			t.Fatalf("turn %d: Token after the last Unlock = %d", turn, l.Token())
		}
		last = tok
	}
	if v := srv.Client(t).Get(ctx, "redisson_lock_token:{fenced}").Val(); v != fmt.Sprint(last) {
		t.Fatalf("token key = %s, want %d", v, last)
	}
	if plain := newClient(t, srv.Client(t)).Lock("plain"); plain.Token() != 0 {
		t.Fatal("a plain lock reports a token")
	}
}

func TestReadersShareWriterExcludes(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	c := newClient(t, srv.Client(t))
	var readers []*lockactor.ReadWriteLock
	for i := 0; i < 5; i++ {
		rw := newClient(t, srv.Client(t)).ReadWriteLock("rw")
		if ok, err := rw.ReadLock().TryLock(ctx); !ok || err != nil {
			t.Fatalf("reader %d: %v, %v (readers must share)", i, ok, err)
		}
		readers = append(readers, rw)
	}
	writer := c.ReadWriteLock("rw").WriteLock()
	got := make(chan struct{})
	go func() {
		if err := writer.Lock(ctx); err != nil {
			t.Errorf("writer: %v", err)
		}
		close(got)
	}()
	for i, rw := range readers {
		time.Sleep(50 * time.Millisecond)
		select {
		case <-got:
			t.Fatalf("writer got the lock while %d readers held", len(readers)-i)
		default:
		}
		if err := rw.ReadLock().Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-got:
	case <-time.After(2 * time.Second):
		t.Fatal("writer not granted after every reader left")
	}
	late := c.ReadWriteLock("rw").ReadLock()
	if ok, err := late.TryLock(ctx, lockactor.WithWait(100*time.Millisecond)); ok || err != nil {
		t.Fatalf("reader during a write hold = %v, %v", ok, err)
	}
	if err := writer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := late.TryLock(ctx, lockactor.WithWait(time.Second)); !ok || err != nil {
		t.Fatalf("reader after the write hold = %v, %v", ok, err)
	}
}

func TestDowngradeAndUpgrade(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxFor(t, 20*time.Second)
	c := newClient(t, srv.Client(t))
	rw := c.ReadWriteLock("grade")

	// Downgrade: write, read as the same owner, drop the write.
	if err := rw.WriteLock().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := rw.ReadLock().TryLock(ctx); !ok || err != nil {
		t.Fatalf("write-then-read reentry = %v, %v", ok, err)
	}
	if err := rw.WriteLock().Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if mode := rdb.HGet(ctx, "grade", "mode").Val(); mode != "read" {
		t.Fatalf("mode after downgrade = %q, want read", mode)
	}
	other := c.ReadWriteLock("grade")
	if ok, err := other.ReadLock().TryLock(ctx); !ok || err != nil {
		t.Fatalf("another reader after the downgrade = %v, %v", ok, err)
	}
	if ok, _ := other.WriteLock().TryLock(ctx); ok {
		t.Fatal("a writer got the lock while read holds remain")
	}
	_ = other.ReadLock().Unlock(ctx)

	// Upgrade: this owner holds only read holds; the write view refuses at once.
	start := time.Now()
	err := rw.WriteLock().Lock(ctx)
	if !errors.Is(err, lockactor.ErrInvalidArgument) {
		t.Fatalf("read-to-write upgrade = %v, want ErrInvalidArgument", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("upgrade refusal took %v", d)
	}
	if _, err := rw.WriteLock().TryLock(ctx, lockactor.WithWait(time.Second)); !errors.Is(err, lockactor.ErrInvalidArgument) {
		t.Fatalf("TryLock upgrade = %v, want ErrInvalidArgument", err)
	}
	if err := rw.ReadLock().Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "grade").Val(); n != 0 {
		t.Fatal("lock left behind after every hold went")
	}
}

func TestWriteLockMutualExclusion(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	var (
		mu      sync.Mutex
		log     []section
		readers atomic.Int32
		writers atomic.Int32
		wg      sync.WaitGroup
	)
	for i := 0; i < 3; i++ {
		c := newClient(t, srv.Client(t))
		for j := 0; j < 6; j++ {
			rw := c.ReadWriteLock("rw-mx")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < 6; r++ {
					if (i+j+r)%3 == 0 { // a reader turn: must never see a writer inside
						if err := rw.ReadLock().Lock(ctx); err != nil {
							t.Errorf("read Lock: %v", err)
							return
						}
						readers.Add(1)
						if n := writers.Load(); n != 0 {
							t.Errorf("reader inside with %d writers", n)
						}
						time.Sleep(200 * time.Microsecond)
						readers.Add(-1)
						if err := rw.ReadLock().Unlock(ctx); err != nil {
							t.Errorf("read Unlock: %v", err)
						}
						continue
					}
					if err := rw.WriteLock().Lock(ctx); err != nil {
						t.Errorf("write Lock: %v", err)
						return
					}
					start := time.Now()
					writers.Add(1)
					if n := readers.Load(); n != 0 {
						t.Errorf("writer inside with %d readers", n)
					}
					time.Sleep(200 * time.Microsecond)
					writers.Add(-1)
					end := time.Now()
					if err := rw.WriteLock().Unlock(ctx); err != nil {
						t.Errorf("write Unlock: %v", err)
					}
					mu.Lock()
					log = append(log, section{fmt.Sprint(i, "/", j), start, end})
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if bad := overlaps(log); len(bad) > 0 {
		t.Fatalf("%d overlapping write sections, first: %s", len(bad), bad[0])
	}
	if len(log) == 0 {
		t.Fatal("no write section ran")
	}
}

func TestSemaphoreNeverExceedsPermits(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	const permits = 3
	if ok, err := newClient(t, srv.Client(t)).Semaphore("sem").TrySetPermits(ctx, permits); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	var inside, peak atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		s := newClient(t, srv.Client(t)).Semaphore("sem")
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < 10; r++ {
					if err := s.Acquire(ctx, 1); err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					n := inside.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := s.Release(ctx, 1); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if p := peak.Load(); p > permits {
		t.Fatalf("%d permits in use at once, only %d exist", p, permits)
	}
	if n, _ := newClient(t, srv.Client(t)).Semaphore("sem").AvailablePermits(ctx); n != permits {
		t.Fatalf("AvailablePermits at the end = %d, want %d", n, permits)
	}
}

func TestSemaphoreWakesOnReleaseElsewhere(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	a := newClient(t, srv.Client(t)).Semaphore("sem-wake")
	b := newClient(t, srv.Client(t)).Semaphore("sem-wake")
	if ok, err := a.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, _ := a.TrySetPermits(ctx, 5); ok {
		t.Fatal("TrySetPermits replaced an existing count")
	}
	if err := a.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryAcquire(ctx, 1, 0); ok || err != nil {
		t.Fatalf("TryAcquire with none left = %v, %v", ok, err)
	}
	d := wakeAfter(t, func() error { return b.Acquire(ctx, 1) }, func() error { return a.Release(ctx, 1) })
	if d > 300*time.Millisecond {
		t.Fatalf("blocked Acquire woke %v after the Release, want <= 300ms", d)
	}
	// Cancel mid-wait: no permit taken.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := a.Acquire(cctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with none left and a 100ms ctx = %v", err)
	}
	if err := a.AddPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.AvailablePermits(ctx); n != 2 {
		t.Fatalf("AvailablePermits = %d, want 2", n)
	}
}

func TestFamilyBadInput(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	var nilCtx context.Context
	sem := c.Semaphore("s")
	tests := map[string]func() error{
		"FairLock empty name":      func() error { return c.FairLock("").Lock(ctx) },
		"FencedLock empty name":    func() error { return c.FencedLock("").Lock(ctx) },
		"ReadLock empty name":      func() error { return c.ReadWriteLock("").ReadLock().Lock(ctx) },
		"WriteLock empty name":     func() error { _, err := c.ReadWriteLock("").WriteLock().TryLock(ctx); return err },
		"FairLock negative wait":   func() error { _, err := c.FairLock("f").TryLock(ctx, lockactor.WithWait(-1)); return err },
		"Semaphore empty name":     func() error { return c.Semaphore("").Acquire(ctx, 1) },
		"Acquire 0":                func() error { return sem.Acquire(ctx, 0) },
		"Acquire -1":               func() error { return sem.Acquire(ctx, -1) },
		"TryAcquire 0":             func() error { _, err := sem.TryAcquire(ctx, 0, 0); return err },
		"TryAcquire negative wait": func() error { _, err := sem.TryAcquire(ctx, 1, -time.Second); return err },
		"Release 0":                func() error { return sem.Release(ctx, 0) },
		"TrySetPermits -1":         func() error { _, err := sem.TrySetPermits(ctx, -1); return err },
		"Acquire nil ctx":          func() error { return sem.Acquire(nilCtx, 1) },
		"AvailablePermits nil ctx": func() error { _, err := sem.AvailablePermits(nilCtx); return err },
		"AddPermits empty name":    func() error { return c.Semaphore("").AddPermits(ctx, 1) },
	}
	rdb := srv.Client(t)
	before := commandsProcessed(t, rdb)
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, lockactor.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	if after := commandsProcessed(t, rdb); after != before+1 {
		t.Fatalf("bad input sent %d commands to Redis", after-before-1)
	}
}

func TestRWWatchdogRenewsOnlyOwnHolds(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxFor(t, 20*time.Second)
	const wd = 900 * time.Millisecond
	reader := newClient(t, srv.Client(t), lockactor.WithWatchdogTimeout(wd)).ReadWriteLock("rw-wd").ReadLock()
	if err := reader.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A peer reader with a short lease beside ours.
	peer := newPeer(rdb)
	keys := []string{"rw-wd", "{rw-wd}:" + peer.owner + ":rwlock_timeout"}
	if err := rdb.Eval(ctx, peerReadLock, keys, 300, peer.owner).Err(); err != redis.Nil {
		t.Fatalf("peer read: %v", err)
	}
	time.Sleep(3 * wd)
	if held, _ := reader.IsHeldByMe(ctx); !held {
		t.Fatal("our read hold expired under the watchdog")
	}
	field, err := rdb.HKeys(ctx, "rw-wd").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ours string
	for _, f := range field {
		if f != "mode" && f != peer.owner {
			ours = f
		}
	}
	if d := rdb.PTTL(ctx, "{rw-wd}:"+ours+":rwlock_timeout:1").Val(); d <= 0 {
		t.Fatalf("our hold key's TTL = %v after 3 watchdog periods", d)
	}
	if n := rdb.Exists(ctx, "{rw-wd}:"+peer.owner+":rwlock_timeout:1").Val(); n != 0 {
		t.Fatal("our watchdog renewed the peer's hold key")
	}
	select {
	case <-reader.Lost():
		t.Fatal("Lost closed on a renewed read hold")
	default:
	}
}
