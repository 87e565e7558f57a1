package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestRWWaitingWriterHoldsLaterReadersBack guards a past defect: within one
// Client, a reader that asked while a writer was queued was granted at once
// (the read lock was held, so Redis said yes), and a steady flow of readers
// could starve the writer. As in sync.RWMutex, a waiting writer now holds
// later readers of its Client back (its own owner's too: granted a read
// first, its queued write would be refused as an upgrade); an owner that
// already holds (reentrant read, write-then-read) never waits behind
// anyone, or it would wait for itself.
func TestRWWaitingWriterHoldsLaterReadersBack(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// first takes the hold the writer queues behind, on the owner
		// that will ask to read later when reentrant.
		writeFirst bool
		// reentrant: the late reader is the first holder's owner.
		reentrant bool
		// writers: the late reader is the queued writer's owner.
		writers bool
		// try: the late reader uses TryLock (one attempt), else Lock.
		try bool
		// wantAtOnce: the late reader is granted while the writer waits.
		wantAtOnce bool
	}{
		{name: "NewReaderWaits", wantAtOnce: false},
		{name: "NewReaderTryLockRefused", try: true, wantAtOnce: false},
		{name: "WritersOwnReaderWaits", writers: true, wantAtOnce: false},
		{name: "ReentrantReadGoesFirst", reentrant: true, wantAtOnce: true},
		{name: "ReentrantTryLockGoesFirst", reentrant: true, try: true, wantAtOnce: true},
		{name: "WriteThenReadGoesFirst", writeFirst: true, reentrant: true, wantAtOnce: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			c := newClient(t, srv.Client(t))
			ctx := ctxFor(t, 20*time.Second)
			name := "rw-writer-first-" + tt.name
			first := c.ReadWriteLock(name)
			held := first.ReadLock()
			if tt.writeFirst {
				held = first.WriteLock()
			}
			if err := held.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			// The first hold's own stay in the queue is counted until the
			// actor settles after granting it.
			within(t, 5*time.Second, "the first hold left the queue", func() bool { return lockactor.QueuedRW(c, name) == 0 })
			waiting := c.ReadWriteLock(name)
			writer := waiting.WriteLock()
			wrote := make(chan error, 1)
			go func() { wrote <- writer.Lock(ctx) }()
			within(t, 5*time.Second, "the writer queued", func() bool { return lockactor.QueuedRW(c, name) == 1 })

			late := c.ReadWriteLock(name).ReadLock()
			switch {
			case tt.reentrant:
				late = first.ReadLock()
			case tt.writers:
				late = waiting.ReadLock()
			}
			var got bool
			var err error
			if tt.try {
				got, err = late.TryLock(ctx)
			} else {
				lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				err = late.Lock(lctx)
				cancel()
				got = err == nil
				if errors.Is(err, context.DeadlineExceeded) {
					err = nil // still waiting when its ctx ended
				}
			}
			if err != nil {
				t.Fatalf("late reader: %v", err)
			}
			if got != tt.wantAtOnce {
				t.Fatalf("late reader granted = %v while a writer waits, want %v", got, tt.wantAtOnce)
			}
			select {
			case err := <-wrote:
				t.Fatalf("the writer returned while the first hold stood: %v", err)
			default:
			}
			// No deadlock: once the first owner lets go of everything,
			// the writer gets the lock.
			if got {
				if err := late.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-wrote:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the writer was not granted after the readers left")
			}
			if err := writer.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A read unlock must not shorten a write hold's TTL: once read_unlock
// recomputed the hash's TTL from the remaining read holds alone (the write
// hold has no rwlock_timeout key), so a short-lease read hold taken under a
// write hold let another writer in ~200 ms after a read unlock.
func TestReadUnlockKeepsWriteHoldTTL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		write []lockactor.LockOption // how the write hold is taken
	}{
		{"watchdog", nil},
		{"long lease", []lockactor.LockOption{lockactor.WithLease(20 * time.Second)}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			ctx := ctxFor(t, 20*time.Second)
			name := "rw-short-read-" + string(rune('a'+i))
			rw := newClient(t, srv.Client(t)).ReadWriteLock(name)
			if err := rw.WriteLock().Lock(ctx, tt.write...); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := rw.ReadLock().Lock(ctx, lockactor.WithLease(200*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
			}
			if err := rw.ReadLock().Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(400 * time.Millisecond)
			other := newClient(t, srv.Client(t)).ReadWriteLock(name).WriteLock()
			if ok, err := other.TryLock(ctx); ok || err != nil {
				t.Fatalf("another writer's TryLock during the first write hold = %v, %v (hash PTTL now %v)",
					ok, err, srv.Client(t).PTTL(ctx, name).Val())
			}
			select {
			case <-rw.WriteLock().Lost():
				t.Fatal("the write hold's Lost closed after a read unlock")
			default:
			}
			if err := rw.WriteLock().Unlock(ctx); err != nil {
				t.Fatalf("write Unlock: %v", err)
			}
		})
	}
}

func TestReadersShareWriterExcludes(t *testing.T) {
	t.Parallel()
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

func TestRWWatchdogRenewsOnlyOwnHolds(t *testing.T) {
	t.Parallel()
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
