package redisio

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

func TestParseHello(t *testing.T) {
	tests := []struct {
		payload      string
		addr, master string
		ok           bool
	}{
		{"127.0.0.1,26379,5b0f,3,mymaster,127.0.0.1,6379,3", "127.0.0.1:26379", "mymaster", true},
		{"::1,26379,5b0f,3,mymaster,::1,6379,3", "[::1]:26379", "mymaster", true},
		{"127.0.0.1,26379,5b0f", "", "", false},            // cut short
		{",26379,5b0f,3,mymaster,h,6379,3", "", "", false}, // no host
		{"", "", "", false},
	}
	for _, tt := range tests {
		addr, master, ok := parseHello(tt.payload)
		if addr != tt.addr || master != tt.master || ok != tt.ok {
			t.Errorf("parseHello(%q) = %q, %q, %v; want %q, %q, %v", tt.payload, addr, master, ok, tt.addr, tt.master, tt.ok)
		}
	}
}

func TestParseSentinelEvent(t *testing.T) {
	tests := []struct {
		channel, payload string
		want             SentinelEvent
		ok               bool
	}{
		{"+sdown", "master mymaster 127.0.0.1 6379", SentinelEvent{Kind: "+sdown"}, true},
		{"+sdown", "slave 127.0.0.1:6380 127.0.0.1 6380 @ mymaster 127.0.0.1 6379", SentinelEvent{}, false},
		{"+sdown", "master other 127.0.0.1 6379", SentinelEvent{}, false},
		{"+odown", "master mymaster 127.0.0.1 6379 #quorum 2/2", SentinelEvent{Kind: "+odown"}, true},
		{"+try-failover", "master mymaster 127.0.0.1 6379", SentinelEvent{Kind: "+try-failover"}, true},
		{"+promoted-slave", "slave 127.0.0.1:6380 127.0.0.1 6380 @ mymaster 127.0.0.1 6379",
			SentinelEvent{Kind: "+promoted-slave", Master: "127.0.0.1:6380"}, true},
		{"+promoted-slave", "slave 127.0.0.1:6380 127.0.0.1 6380 @ other 127.0.0.1 6379", SentinelEvent{}, false},
		{"+switch-master", "mymaster 127.0.0.1 6379 127.0.0.1 6380",
			SentinelEvent{Kind: "+switch-master", Master: "127.0.0.1:6380"}, true},
		{"+switch-master", "other 127.0.0.1 6379 127.0.0.1 6380", SentinelEvent{}, false},
		{"+switch-master", "mymaster 127.0.0.1", SentinelEvent{}, false},
		{"+new-epoch", "3", SentinelEvent{}, false},
	}
	for _, tt := range tests {
		got, ok := parseSentinelEvent(tt.channel, tt.payload, "mymaster")
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseSentinelEvent(%q, %q) = %+v, %v; want %+v, %v", tt.channel, tt.payload, got, ok, tt.want, tt.ok)
		}
	}
}

// TestWatchSentinelsHearsAFailover: a Client that only has a
// FailoverClient finds the sentinels from their hellos and hears a
// failover's steps, the new master named, as they happen.
func TestWatchSentinelsHearsAFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	rdb := s.FailoverClient(t, nil)
	c := NewConn(rdb, NewTopology(rdb, ShardOff, quiet), SyncPolicy{})
	defer c.Close(time.Now().Add(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan SentinelEvent, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.WatchSentinels(ctx, func(ev SentinelEvent) {
			select {
			case events <- ev:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()
	// Hellos come every 2 s: wait until every sentinel is subscribed to
	// (a connection with our channels shows in its CLIENT LIST).
	deadline := time.Now().Add(15 * time.Second)
	mark := fmt.Sprintf("sub=%d ", len(sentinelChannels))
	for _, n := range s.Sentinels() {
		sc := n.Client(t)
		for {
			list, err := sc.ClientList(ctx).Result()
			if err == nil && strings.Contains(list, mark) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sentinel %s: not subscribed to after 15s (%v):\n%s", n.Addr(), err, list)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	promoted := s.Failover(t)
	want := map[string]bool{"+try-failover": false, "+promoted-slave": false, "+switch-master": false}
	timeout := time.After(20 * time.Second)
	for seen := 0; seen < len(want); {
		select {
		case ev := <-events:
			if done, ok := want[ev.Kind]; ok && !done {
				want[ev.Kind] = true
				seen++
			}
			if ev.Master != "" && !sameServer(ev.Master, promoted.Addr()) {
				t.Fatalf("%s named %s, want the promoted %s", ev.Kind, ev.Master, promoted.Addr())
			}
		case <-timeout:
			t.Fatalf("after 20s, heard %v", want)
		}
	}
}
