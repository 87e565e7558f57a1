package redisio

import (
	"context"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

// A count tells lockactor's listeners (subscribed to the channel's
// ListenerMark too) from others, and a noted release publishes its note on
// the mark just before the lock's message, on the same connection.
func TestListenersAndNotes(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := testConn(t, rdb, ShardOff)
	p := NewPubSub(rdb, NewTopology(rdb, ShardOff, quiet), time.Second, quiet)
	defer p.Close(time.Now().Add(time.Second))

	const name = "counted"
	ch := LockChannel(name)
	got := make(chan string, 16) // "<channel>=<payload>", in arrival order
	on := func(label string) Handler {
		return func(ev Event) {
			switch ev.Kind {
			case Message:
				got <- label + "=" + ev.Payload
			case Subscribed:
				got <- label + " subscribed"
			}
		}
	}
	if _, err := p.Subscribe(ctx, ListenerMark(ch), on("mark")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Subscribe(ctx, ch, on("lock")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		<-got // both confirmed
	}
	count := func() Listeners {
		t.Helper()
		res := make(chan Listeners, 1)
		c.SubscribersThen(ctx, ch, func(l Listeners, err error) {
			if err != nil {
				t.Error(err)
			}
			res <- l
		})
		return <-res
	}
	if l := count(); l != (Listeners{All: 1, Ours: 1}) || l.Foreign() {
		t.Fatalf("ours alone: %+v, want 1 of 1, none foreign", l)
	}
	foreign := srv.Client(t).Subscribe(ctx, ch) // a Redisson client's waiter
	defer foreign.Close()
	if _, err := foreign.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if l := count(); l != (Listeners{All: 2, Ours: 1}) || !l.Foreign() {
		t.Fatalf("with a foreign waiter: %+v, want 2 of which 1 ours, foreign", l)
	}

	op := func(seq uint64) Op { return Op{Latch: LatchKey(name, "c", "lock"), Seq: seq, Keep: time.Minute} }
	for i, row := range []struct {
		unlock func() Reply
		want   []string
	}{
		{func() Reply { return c.UnlockNoted(ctx, op(1), name, "owner", time.Minute, "750") }, []string{"mark=750", "lock=0"}},
		{func() Reply { return c.Unlock(ctx, op(2), name, "owner", time.Minute) }, []string{"lock=0"}},
	} {
		if err := rdb.HSet(ctx, name, "owner", 1).Err(); err != nil {
			t.Fatal(err)
		}
		if res, err := row.unlock().Unlock(); res != Released || err != nil {
			t.Fatalf("row %d: unlock = %v, %v; want released", i, res, err)
		}
		for _, want := range row.want {
			select {
			case ev := <-got:
				if ev != want {
					t.Fatalf("row %d: heard %q, want %q (in order %v)", i, ev, want, row.want)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("row %d: nothing heard, want %q", i, want)
			}
		}
		select {
		case ev := <-got:
			t.Fatalf("row %d: heard %q besides %v", i, ev, row.want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
