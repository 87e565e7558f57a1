package torture

import (
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
)

// connect makes the admin clients, the setup Client and the hooked Clients
// on the two servers.
func (r *runner) connect() {
	r.admin = map[string]redis.UniversalClient{}
	for _, s := range []string{"A", "B"} {
		r.admin[s] = redis.NewClient(&redis.Options{Addr: r.servers[s].Addr()})
	}
	r.connectClients("", nil, func(server string, h *Hook) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: r.servers[server].Addr()})
		rdb.AddHook(h)
		return rdb
	})
}

// connectClients makes the setup Client (on admin A) and the hooked Clients
// of servers A and B, each through newClient, with opts (a topology's) and
// the run's options; where names the deployment in errors.
func (r *runner) connectClients(where string, opts []lockactor.Option, newClient func(server string, h *Hook) redis.UniversalClient) {
	var err error
	if r.setup, err = lockactor.New(r.admin["A"], opts...); err != nil {
		r.tb.Fatalf("torture: setup client: %v", err)
	}
	for _, s := range []struct {
		server string
		n      int
	}{{"A", clientsA}, {"B", clientsB}} {
		for i := 0; i < s.n; i++ {
			name := fmt.Sprintf("%s%d", s.server, i+1)
			h := &Hook{Server: s.server, Client: i, Name: name, Faults: &r.faults, OnRenew: r.onRenew, Noted: &r.noted,
				OnRenewReply: r.topo.onRenewReply, Sent: &r.topo.sent}
			rdb := newClient(s.server, h)
			wd := watchdog
			if s.server == "A" && i == s.n-1 {
				wd = shortWatchdog
			}
			// The clients a Client makes of one server (after a Sentinel
			// switch) carry the hook too: what it sends there is seen and
			// faulted as the rest.
			all := append(append([]lockactor.Option{lockactor.WithWatchdogTimeout(wd), lockactor.WithLogger(slog.New(dropWatch{r})),
				lockactor.WithServerClients(func(c *redis.Client) { c.AddHook(h) })}, opts...), r.cfg.Options...)
			if s.server == "A" && i == 0 {
				// Its SpinLocks publish nothing (the quiet release path);
				// the shared names' waiters of other kinds then wait for
				// the lease, which liveness does not judge there.
				all = append(all, lockactor.WithSpinPublish(false))
			}
			c, err := lockactor.New(rdb, all...)
			if err != nil {
				r.tb.Fatalf("torture: client %s%s: %v", name, where, err)
			}
			cl := &client{name: name, server: s.server, c: c, rdb: rdb}
			r.clients = append(r.clients, cl)
			r.byServer[s.server] = append(r.byServer[s.server], cl)
		}
	}
}
