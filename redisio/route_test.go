package redisio

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// A FailoverClient dials through its sentinel, and a stopped sentinel holds
// each dial for go-redis's read timeout, again and again: a pipeline waiting
// for a connection of that client must give up once RouteTo sends the
// Conn's commands to the new master, or every later call of the Conn (the
// renewals of the holds, the next grants) waits behind it. The client here
// is a FailoverClient whose dialer never answers until the test ends.
func TestRouteFreesAPipelineWaitingOnTheFormerClient(t *testing.T) {
	srv := redistest.Start(t)
	release := make(chan struct{})
	dialing := make(chan struct{}, 1)
	rdb := redis.NewClient(&redis.Options{
		Addr: "FailoverClient", // what go-redis's NewFailoverClient sets
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			select {
			case dialing <- struct{}{}:
			default:
			}
			<-release // the sentinel it asks is stopped
			return nil, errors.New("no master: the sentinel did not answer")
		},
		MaxRetries: -1,
	})
	c := testConn(t, rdb, ShardOff)
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(func() { close(release) }) // runs first: the dials end before Close waits

	ctx := context.Background()
	srv.Client(t).HSet(ctx, "held", "me", 1)
	renew := func(name string) chan error {
		got := make(chan error, 1)
		c.Renew(ctx, name, "me", 10*time.Second, nil, func(ok bool, err error) {
			if err == nil && !ok {
				err = errors.New("not held")
			}
			got <- err
		})
		return got
	}

	stuck := renew("held")
	select {
	case <-dialing:
	case err := <-stuck:
		t.Fatalf("the renewal through a client that cannot dial returned: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the renewal never asked the client for a connection")
	}
	if _, err := c.RouteTo(ctx, srv.Addr()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stuck:
		if err == nil {
			t.Fatal("the renewal waiting on the former client succeeded; want it to give up")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the renewal waiting on the former client still waits after RouteTo")
	}
	select {
	case err := <-renew("held"):
		if err != nil {
			t.Fatalf("a renewal after RouteTo: %v; want it renewed on the server routed to", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a renewal after RouteTo never came back")
	}
}
