package lockactor_test

// Fencing tokens across a counter that went back: a Sentinel
// failover or a crash can lose writes the old master acknowledged, so the
// new master's redisson_lock_token:{name} can be lower than a token already
// issued. These tests put the counter back by hand, as such a failover
// would have left it, on one real redis-server.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// tokenKey is the fenced lock's counter for name.
func tokenKey(name string) string { return "redisson_lock_token:{" + name + "}" }

// lockToken takes l, reads its token and releases it.
func lockToken(t *testing.T, ctx context.Context, l *lockactor.Lock, try bool) uint64 {
	t.Helper()
	if try {
		if ok, err := l.TryLock(ctx); !ok || err != nil {
			t.Fatalf("TryLock = %v, %v", ok, err)
		}
	} else if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok := l.Token()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return tok
}

// aheadOfClock is a token counter above any server clock in microseconds
// (about 1.8e15 today), which fenced_lock.lua's clock cannot overtake.
const aheadOfClock = 1 << 52

// TestFencedTokenNeverGoesBackForAClient: a Client took token top; then the
// counter went back (or was lost), as a lossy failover leaves it. The
// Client's next grant on the name, through any handle and however it asks,
// must still carry a token above top, and the counter in Redis must be
// raised to it, so that the Client's later grants (and everyone else's)
// continue from there.
func TestFencedTokenNeverGoesBackForAClient(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	setBack := func(t *testing.T, ctx context.Context, name string, top uint64) {
		if err := rdb.Set(ctx, tokenKey(name), top-3, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	wipe := func(t *testing.T, ctx context.Context, name string, _ uint64) {
		if err := rdb.Del(ctx, tokenKey(name)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	restart := func(t *testing.T, _ context.Context, _ string, _ uint64) { srv.Restart(t) } // no persistence: every key is gone
	rows := []struct {
		name   string
		back   func(t *testing.T, ctx context.Context, name string, top uint64)
		other  bool // the second grant goes to another handle of the Client
		try    bool // the second grant is a TryLock
		retire bool // the name's actor retires before the counter goes back
		evict  bool // the Client remembers 2 names and uses 2 others before the counter goes back
	}{
		{name: "counter set back, same handle", back: setBack},
		{name: "counter set back, another handle", back: setBack, other: true},
		{name: "counter set back, TryLock", back: setBack, try: true},
		{name: "counter deleted", back: wipe},
		{name: "counter set back after the actor retired", back: setBack, other: true, retire: true},
		{name: "counter set back after the name fell out of the Client's memory", back: setBack, evict: true},
		{name: "server restarted without persistence", back: restart},
	}
	for i, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			name := fmt.Sprintf("fence-back-%d", i)
			opts := []lockactor.Option{lockactor.WithIdleActorTimeout(100 * time.Millisecond)}
			if tt.evict {
				opts = append(opts, lockactor.WithTokenMemory(2))
			}
			c := newClient(t, srv.Client(t), opts...)
			first := c.FencedLock(name)
			// Tokens issued before, above the server's clock, so that the
			// clock (which the script also reads) cannot hide a counter
			// that went back: only the Client's memory can.
			if err := rdb.Set(ctx, tokenKey(name), aheadOfClock+20, 0).Err(); err != nil {
				t.Fatal(err)
			}
			top := lockToken(t, ctx, first, false)
			if top != aheadOfClock+21 {
				t.Fatalf("first token = %d, want %d", top, aheadOfClock+21)
			}
			if tt.retire {
				within(t, 10*time.Second, "the actor retired", func() bool { return lockactor.ActorCount(c) == 0 })
			}
			if tt.evict {
				lockToken(t, ctx, c.FencedLock(name+"-a"), false)
				lockToken(t, ctx, c.FencedLock(name+"-b"), false) // name falls out
				// A name not remembered starts above every token of the
				// names that fell out: it may be one of them.
				if tok := lockToken(t, ctx, c.FencedLock(name+"-c"), false); tok <= top {
					t.Fatalf("a fresh name's token %d after %s's %d fell out of the memory: not above it", tok, name, top)
				}
			}
			tt.back(t, ctx, name, top)
			second := first
			if tt.other {
				second = c.FencedLock(name)
			}
			got := lockToken(t, ctx, second, tt.try)
			if got <= top {
				t.Fatalf("token %d after %d: the Client's token went back", got, top)
			}
			if v, _ := rdb.Get(ctx, tokenKey(name)).Uint64(); v != got {
				t.Fatalf("counter = %d after the grant of %d, want it raised to the token", v, got)
			}
			if again := lockToken(t, ctx, second, false); again != got+1 {
				t.Fatalf("next token = %d, want %d: grants go on from the raised counter", again, got+1)
			}
		})
	}
}

// TestFencedTokensRiseAcrossHandlesOfAClient: several handles of one Client
// take turns on a name while the counter keeps going back (set lower, or
// deleted). Taken in the order the holds were granted, every token is
// above the one before.
func TestFencedTokensRiseAcrossHandlesOfAClient(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxFor(t, 60*time.Second)
	const name, handles, rounds = "fence-handles", 4, 30
	c := newClient(t, srv.Client(t))
	var (
		mu     sync.Mutex
		tokens []uint64
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	backs := make(chan int, 1)
	go func() { // the counter goes back every few milliseconds
		n := 0
		defer func() { backs <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			if v, err := rdb.Get(ctx, tokenKey(name)).Int64(); err == nil && n%2 == 0 {
				rdb.Set(ctx, tokenKey(name), max(0, v-5), 0)
			} else {
				rdb.Del(ctx, tokenKey(name))
			}
			n++
		}
	}()
	for range handles {
		l := c.FencedLock(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := l.Lock(ctx); err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				time.Sleep(time.Millisecond)
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if n := <-backs; n == 0 {
		t.Fatal("the counter never went back during the run")
	}
	if len(tokens) != handles*rounds {
		t.Fatalf("%d grants, want %d", len(tokens), handles*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("grant %d got token %d after %d (tokens %v)", i, tokens[i], tokens[i-1], tokens)
		}
	}
}

// TestFencedReentrantKeepsItsToken: while a hold is open the counter goes
// back. A reentrant grant reports the hold's own token, not the lower
// counter; the counter is put back to it; and the next hold from zero
// gets a token above it.
func TestFencedReentrantKeepsItsToken(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxFor(t, 30*time.Second)
	l := newClient(t, srv.Client(t)).FencedLock("fence-reentrant")
	rdb.Set(ctx, tokenKey("fence-reentrant"), 40, 0)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	top := l.Token()
	rdb.Set(ctx, tokenKey("fence-reentrant"), top-3, 0)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Token() != top {
		t.Fatalf("reentrant hold reports token %d, want the hold's own %d", l.Token(), top)
	}
	if v, _ := rdb.Get(ctx, tokenKey("fence-reentrant")).Uint64(); v < top {
		t.Fatalf("counter = %d after a reentrant grant of a hold with token %d: not raised back", v, top)
	}
	for range 2 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := lockToken(t, ctx, l, false); got <= top {
		t.Fatalf("token %d after %d", got, top)
	}
}

// TestFencedTokenPromiseAcrossClients: after the counter went back, a
// Client that never saw the highest token still gets a higher one, from
// the server's clock. Where the promise ends: a counter that had been
// raised above the clock (by hand, or by a client that INCRs faster than
// once a microsecond) and then went back. Then only a Client that saw the
// higher tokens gets one above them; its grant raises the counter, and the
// other Client's next token is higher again.
func TestFencedTokenPromiseAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxFor(t, 30*time.Second)
	for _, tt := range []struct {
		name  string
		start uint64 // the counter before A's first grant
		above bool   // B's token is above A's first though B never saw it
	}{
		{"counter below the clock", 20, true},
		{"counter above the clock", aheadOfClock + 20, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := "fence-two-" + strconv.FormatBool(tt.above)
			a := newClient(t, srv.Client(t)).FencedLock(name)
			b := newClient(t, srv.Client(t)).FencedLock(name)
			rdb.Set(ctx, tokenKey(name), tt.start, 0)
			top := lockToken(t, ctx, a, false)
			rdb.Set(ctx, tokenKey(name), top-3, 0)
			got := lockToken(t, ctx, b, false)
			if tt.above && got <= top {
				t.Fatalf("B's token = %d after A's %d: the clock did not carry it above", got, top)
			}
			if !tt.above && got != top-2 {
				t.Fatalf("B's token = %d, want %d: B never saw %d, and gets the counter's next", got, top-2, top)
			}
			ta := lockToken(t, ctx, a, false)
			if ta <= max(top, got) {
				t.Fatalf("A's token %d after %d and B's %d", ta, top, got)
			}
			if tb := lockToken(t, ctx, b, false); tb <= ta {
				t.Fatalf("B's token %d after A raised the counter to %d", tb, ta)
			}
		})
	}
}

// peerFencedLock is Redisson's RedissonFencedLock acquire
// (tryLockInnerAsync, lockAndGetToken): every grant, reentrant or not,
// INCRs the counter; {-1, token} when granted, {pttl, -1} when not.
const peerFencedLock = `
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}`

// TestRedissonPeerFencedAfterCounterWentBack: our raise of the counter is
// an ordinary write a Redisson peer's INCR continues from; the peer never
// sees a token lower than its own INCR would have given.
func TestRedissonPeerFencedAfterCounterWentBack(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	peer := newPeer(rdb)
	ctx := ctxFor(t, 30*time.Second)
	const name = "fence-peer"
	peerToken := func() uint64 {
		t.Helper()
		r, err := rdb.Eval(ctx, peerFencedLock, []string{name, tokenKey(name)}, 30000, peer.owner).Int64Slice()
		if err != nil || len(r) != 2 || r[0] != -1 {
			t.Fatalf("peer lockAndGetToken = %v, %v", r, err)
		}
		if n, err := peer.unlock(ctx, name); n != 1 || err != nil {
			t.Fatalf("peer unlock = %d, %v", n, err)
		}
		return uint64(r[1])
	}
	l := newClient(t, srv.Client(t)).FencedLock(name)
	p1 := peerToken()
	ours := lockToken(t, ctx, l, false)
	if ours <= p1 { // the clock, in fact: far above the peer's 1
		t.Fatalf("our token = %d after the peer's %d", ours, p1)
	}
	rdb.Set(ctx, tokenKey(name), 0, 0)
	if p2 := peerToken(); p2 != 1 {
		t.Fatalf("peer token = %d on a counter set to 0, want 1 (its own INCR)", p2)
	}
	ours2 := lockToken(t, ctx, l, false)
	if ours2 <= ours {
		t.Fatalf("our token %d after our %d", ours2, ours)
	}
	if p3 := peerToken(); p3 != ours2+1 {
		t.Fatalf("peer token = %d after our raise to %d, want %d", p3, ours2, ours2+1)
	}
	if v := rdb.Get(ctx, tokenKey(name)).Val(); v != strconv.FormatUint(ours2+1, 10) {
		t.Fatalf("counter = %q, want %d", v, ours2+1)
	}
}

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
