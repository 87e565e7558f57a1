package torture

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelNews is one failover step a sentinel announced on its pub/sub,
// as the run heard it: the strict variant reports, per switch, when each
// kind of announcement first came, against the moment a sentinel first
// named the new master (Switch.At) and against the overlaps the switch
// allowed.
type SentinelNews struct {
	T        time.Time
	Sentinel int    // index of the sentinel that said it
	Kind     string // the channel, e.g. "+odown"
	Payload  string
}

// sentinelNewsKinds are the announcements recorded, in the order a
// failover makes them.
var sentinelNewsKinds = []string{"+sdown", "+odown", "+try-failover", "+elected-leader",
	"+promoted-slave", "+failover-state-reconf-slaves", "+switch-master"}

// newsWatch records what the sentinels announce until end.
type newsWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	news   []SentinelNews
}

// watchNews subscribes to every sentinel at addrs.
func watchNews(addrs []string) *newsWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &newsWatch{cancel: cancel}
	for i, a := range addrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: a, DialTimeout: time.Second, MaxRetries: -1})
		ps := c.Subscribe(ctx, sentinelNewsKinds...)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer c.Close()
			defer ps.Close()
			defer context.AfterFunc(ctx, func() { _ = ps.Close() })() // a read ignores ctx
			for {
				msg, err := ps.ReceiveMessage(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					time.Sleep(50 * time.Millisecond) // a sentinel restarting: go-redis dials again
					continue
				}
				w.mu.Lock()
				w.news = append(w.news, SentinelNews{T: time.Now(), Sentinel: i, Kind: msg.Channel, Payload: msg.Payload})
				w.mu.Unlock()
			}
		}()
	}
	return w
}

// end stops the watch and returns what it heard, in time order.
func (w *newsWatch) end() []SentinelNews {
	w.cancel()
	w.wg.Wait()
	sort.SliceStable(w.news, func(i, j int) bool { return w.news[i].T.Before(w.news[j].T) })
	return w.news
}

// newsBefore is, for switch s, the first announcement of each kind that
// came after prev (the switch before, or zero) and within unplannedLead
// before s or switchNotice after, as an offset from s.At ("+odown -1.204s").
func newsBefore(news []SentinelNews, s Switch, prev time.Time) string {
	first := map[string]time.Duration{}
	for _, n := range news {
		d := n.T.Sub(s.At)
		if d < -unplannedLead || d > switchNotice || !n.T.After(prev) {
			continue
		}
		if _, ok := first[n.Kind]; !ok {
			first[n.Kind] = d
		}
	}
	var parts []string
	for _, k := range sentinelNewsKinds {
		if d, ok := first[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %+.3fs", k, d.Seconds()))
		}
	}
	return strings.Join(parts, ", ")
}
