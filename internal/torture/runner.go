package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// Config is one torture run.
type Config struct {
	Seed     int64
	Duration time.Duration // how long the workload runs
	A, B     *redistest.Server
	// OwnerOf gives a handle's hash field (lockactor's export_test.go
	// OwnerOf: only the package's own tests can see it, so they pass it in).
	OwnerOf func(*lockactor.Lock) string
	// HoldField gives the owner whose hash field Redis keeps a handle's
	// current hold under (lockactor's export_test.go HoldField): the
	// handle's own, or that of the owner that relayed the hold to it.
	HoldField func(*lockactor.Lock) string
	// MutexHolder gives the handle of a Mutex's current hold (lockactor's
	// export_test.go MutexHolder), whose hash field and Lost the checks
	// follow; nil: the workload takes no Mutex.
	MutexHolder func(*lockactor.Mutex) *lockactor.Lock
	Workers     int                  // 0: 32
	Logf        func(string, ...any) // progress lines; nil: none
	// DumpPath, if set, receives the whole event log as text (Log.Dump).
	DumpPath string
	// Options are added to every workload Client's (the package's tests
	// pass a short latch record life, so that outages outlast it).
	Options []lockactor.Option
	// Topology, if set, replaces A and B: every Client (of "A" and of "B"
	// alike) talks to this deployment, its fault menu replaces the
	// single-server schedule, and its relaxations (see Relaxations) apply to
	// the checks (SentinelStrictTopology: CheckStrict instead). See
	// ClusterTopology, SentinelTopology, ReplicaSyncTopology.
	Topology Topology
}

// Result is what a run found.
type Result struct {
	Violations []Violation
	Figures    Figures
}

// The run's fixed shape: Clients per server (each over its own go-redis
// client with default options, so go-redis's retries are part of what is
// tested) and their watchdog timeouts, short so that leases matter.
const (
	clientsA        = 3
	clientsB        = 2
	watchdog        = 3 * time.Second
	shortWatchdog   = 2 * time.Second // the last Client of A
	drainTimeout    = 30 * time.Second
	fairQueueWait   = 5 * time.Second
	goroutineSlack  = 5
	goroutineWait   = 5 * time.Second
	heapSlack       = 20 << 20
	setPermitsTries = 20
)

// client is one lockactor Client with its own hooked go-redis client.
type client struct {
	name, server string
	c            *lockactor.Client
	rdb          redis.UniversalClient

	mu      sync.Mutex
	mutexes map[string]*lockactor.Mutex // one per name, shared by every worker
}

// mutex is the Client's Mutex of name, which all its workers share, as
// goroutines share a sync.Mutex.
func (cl *client) mutex(name string) *lockactor.Mutex {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	m := cl.mutexes[name]
	if m == nil {
		if cl.mutexes == nil {
			cl.mutexes = make(map[string]*lockactor.Mutex)
		}
		m = cl.c.Mutex(name)
		cl.mutexes[name] = m
	}
	return m
}

type runner struct {
	tb     testing.TB
	cfg    Config
	start  time.Time
	lim    Limits
	ids    atomic.Int64
	stop   atomic.Bool
	epoch  atomic.Int64 // odd while server A restarts (see semStep)
	gen    atomic.Int64 // semaphore name generation
	faults Faults
	// resent and resentFailed count releases lost in a master switch that
	// a Client sent again, and those sent again in vain (dropWatch).
	resent, resentFailed atomic.Int64
	// routed counts the times a Client sent its commands to a new master
	// ahead of its pool (dropWatch).
	routed atomic.Int64
	// noted counts the releases the Clients sent with a note for a foreign
	// waiter (see listenForeign).
	noted atomic.Int64
	// foreignOn counts the foreign listeners on each Lock name's channel;
	// foreignPairs, the windows that began while the other listened on
	// the same name (see listenForeign).
	foreignOn    [namesPerPrim]atomic.Int32
	foreignPairs atomic.Int64

	servers  map[string]*redistest.Server
	admin    map[string]redis.UniversalClient // unhooked, for CLIENT KILL, LLEN, setup
	setup    *lockactor.Client                // on admin A: TrySetPermits of each generation
	clients  []*client
	byServer map[string][]*client
	workers  []*worker
	self     *recorder // the runner's own calls (TrySetPermits)

	mu        sync.Mutex
	renewals  []Renewal
	faultLog  []Fault
	extraVios []Violation
	reported  map[string]bool // see firstReport

	topo topoState // what a Topology run adds (zero otherwise)
}

func (r *runner) stopping() bool { return r.stop.Load() }

func (r *runner) violate(check, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.extraVios = append(r.extraVios, Violation{Check: check, Msg: msg})
}

func (r *runner) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

// Run runs the workload and the fault schedule for cfg.Duration, then the
// end-of-run checks, and returns every violation and the run's figures. It
// starts no server itself (cfg.A and cfg.B are the caller's) and leaves no
// goroutine behind.
func Run(tb testing.TB, cfg Config) Result {
	if cfg.Workers == 0 {
		cfg.Workers = 32
	}
	r := &runner{tb: tb, cfg: cfg, lim: DefaultLimits(),
		servers: map[string]*redistest.Server{"A": cfg.A, "B": cfg.B}, byServer: map[string][]*client{}}
	r.self = &recorder{g: -1, ids: &r.ids}

	runtime.GC()
	baseG, _ := goroutines()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapAlloc

	clients := map[string]int{"A": clientsA, "B": clientsB}
	var plan []Planned
	if cfg.Topology != nil {
		r.connectTopology()
		plan = cfg.Topology.plan(cfg.Seed, cfg.Duration, clients)
	} else {
		r.connect()
		plan = Plan(cfg.Seed, cfg.Duration, clients)
	}
	var switches *switchWatch
	var news *newsWatch
	if st, ok := cfg.Topology.(interface{ sentinels() (string, []string) }); ok {
		switches = watchSwitches(st.sentinels())
		_, addrs := st.sentinels()
		news = watchNews(addrs)
	}
	stalls := meterStalls()
	start := time.Now()
	r.start = start
	r.newGeneration(0)
	injected := make(chan struct{})
	go func() {
		defer close(injected)
		r.inject(start, plan)
	}()
	foreign := make(chan int, foreignListeners)
	for i := range foreignListeners {
		if cfg.Topology == nil {
			go func() { foreign <- r.listenForeign(cfg.Seed, i) }()
		} else {
			foreign <- 0
		}
	}
	var wg sync.WaitGroup
	for g := 0; g < cfg.Workers; g++ {
		w := &worker{r: r, rec: &recorder{g: g, ids: &r.ids},
			rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(g)+1)),
			ca:  r.byServer["A"][g%clientsA], cb: r.byServer["B"][g%clientsB],
			locks: map[string]*lockactor.Lock{}, rws: map[string]*lockactor.ReadWriteLock{}, multis: map[string]*multiHandle{}}
		r.workers = append(r.workers, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run()
		}()
	}
	time.Sleep(time.Until(start.Add(cfg.Duration)))
	r.stop.Store(true)
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		r.violate(VWorkload, fmt.Sprintf("workers still running %v after the run ended (a call is stuck; see hang violations)", drainTimeout))
	}
	<-injected
	n := 0
	for range foreignListeners {
		n += <-foreign
	}
	if n > 0 {
		r.logf("%d foreign listeners listened on a Lock's channel %d times, %d of them beside each other on one name; %d releases were noted for them",
			foreignListeners, n, r.foreignPairs.Load(), r.noted.Load())
	}
	log := r.collect(start, time.Now())
	log.Stalls = stalls.end()
	if switches != nil {
		log.Switches = switches.end()
		log.News = news.end()
		if _, strict := cfg.Topology.(strictTopology); !strict {
			r.unplannedSwitches(log)
		}
	}
	r.settle(log)
	r.checkSemCounts()
	r.checkClashes(log)

	for _, c := range r.clients {
		_ = c.c.Close()
	}
	_ = r.setup.Close()
	select { // Close returns every waiting call with ErrClosed
	case <-drained:
	case <-time.After(drainTimeout):
		r.violate(VWorkload, fmt.Sprintf("workers still running %v after every Client was closed", drainTimeout))
	}
	for _, c := range r.clients {
		_ = c.rdb.Close()
	}
	for _, a := range r.admin {
		_ = a.Close()
	}

	vs := append(r.check(log), r.extraVios...)
	if cfg.DumpPath != "" {
		if err := dumpTo(cfg.DumpPath, log, vs); err != nil {
			r.logf("dump %s: %v", cfg.DumpPath, err)
		} else {
			r.logf("event log written to %s", cfg.DumpPath)
		}
	}
	figs := Summarize(log, vs, r.faults.Counts())
	if cfg.Topology != nil {
		figs.Topology = r.topoFigures(log)
	}
	// Drop the log before measuring the heap: it is the run's, not a leak.
	// So are the closed Clients: each keeps its actor system's process
	// registry (some 2.5 MB, allocated by protoactor at New) for as long as
	// something refers to it, here the runner.
	log, r.workers, r.self, r.renewals, r.faultLog = nil, nil, nil, nil, nil
	r.clients, r.byServer, r.setup, r.admin = nil, nil, nil, nil
	r.topo.rx, r.topo.replies = Relaxations{}, nil
	r.logf("checked; measuring goroutines and heap")
	vs = append(vs, checkResources(baseG, baseHeap, cfg.DumpPath)...)
	figs.Violations = countViolations(vs)
	return Result{Violations: vs, Figures: figs}
}

// dumpTo writes the log to path and the violations to path+".violations".
func dumpTo(path string, l *Log, vs []Violation) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%s %s\n", l.at(v.At), v)
	}
	if err := os.WriteFile(path+".violations", []byte(b.String()), 0o644); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := l.Dump(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func (r *runner) onRenew(rn Renewal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewals = append(r.renewals, rn)
}

// newGeneration initialises generation g's semaphores and permit
// semaphores with TrySetPermits (through the unhooked setup Client,
// retrying) and makes it current.
func (r *runner) newGeneration(g int64) {
	for i := 0; i < namesPerPrim; i++ {
		sem, ps := r.setup.Semaphore(fmt.Sprintf("sem%d.g%d", i, g)), r.setup.PermitSemaphore(fmt.Sprintf("permit%d.g%d", i, g))
		r.setPermits(PrimSem, sem.Name(), sem.TrySetPermits)
		r.setPermits(PrimPermit, ps.Name(), ps.TrySetPermits)
	}
	r.gen.Store(g)
}

// setPermits runs set (a TrySetPermits) on server A's name until Redis
// answers.
func (r *runner) setPermits(prim Prim, name string, set func(context.Context, int) (bool, error)) {
	for try := 0; try < setPermitsTries; try++ {
		cc := newCallCtx(2*time.Second, 0)
		out, _ := r.self.do(Call{Client: "setup", Prim: prim, Op: OpSetPermits, Res: []string{"A/" + name}, N: r.lim.Permits}, cc,
			func(ctx context.Context) (bool, error) { return set(ctx, r.lim.Permits) })
		cc.done()
		if out == OutOK || out == OutNo {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// collect assembles the log from every recorder.
func (r *runner) collect(start, end time.Time) *Log {
	l := &Log{Start: start, End: end}
	for _, rec := range append([]*recorder{r.self}, recordersOf(r.workers)...) {
		calls, holds := rec.snapshot()
		l.Calls = append(l.Calls, calls...)
		l.Holds = append(l.Holds, holds...)
	}
	slices.SortFunc(l.Calls, func(a, b Call) int { return a.ID - b.ID })
	slices.SortFunc(l.Holds, func(a, b Hold) int { return a.ID - b.ID })
	r.mu.Lock()
	l.Renewals = slices.Clone(r.renewals)
	l.Faults = slices.Clone(r.faultLog)
	r.mu.Unlock()
	l.RenewReplies = r.topo.renewReplies()
	l.Withheld = r.faults.Withheld()
	l.Runs = r.faults.TakeRuns()
	return l
}

func recordersOf(ws []*worker) []*recorder {
	out := make([]*recorder, len(ws))
	for i, w := range ws {
		out[i] = w.rec
	}
	return out
}

// checkResources: after Close, goroutines return to the baseline (within
// goroutineSlack, waiting up to goroutineWait) and the heap after a GC is
// within heapSlack of its baseline.
// goRedisLeaks are go-redis goroutines that outlive a closed client: a
// FailoverClusterClient's sentinel listener, which its Close never reaches
// (go-redis v9.23's sentinel.go), and a dead node's background dials. The
// root package's goleak check ignores them too.
var goRedisLeaks = []string{
	"go-redis/v9.(*sentinelFailover).listen",
	"go-redis/v9.(*channel).initMsgChan.func1",
	"go-redis/v9.(*channel).initHealthCheck.func1",
	"go-redis/v9/internal/pool.(*ConnPool).tryDial",
}

// goroutines counts the running goroutines but go-redis's known leaks, and
// returns the stacks of those counted.
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var kept []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !slices.ContainsFunc(goRedisLeaks, func(f string) bool { return strings.Contains(g, f) }) {
			kept = append(kept, g)
		}
	}
	return len(kept), strings.Join(kept, "\n\n")
}

func checkResources(baseG int, baseHeap uint64, dump string) []Violation {
	var vs []Violation
	deadline := time.Now().Add(goroutineWait)
	n, stacks := goroutines()
	for n > baseG+goroutineSlack && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n, stacks = goroutines()
	}
	if n > baseG+goroutineSlack {
		vs = append(vs, Violation{Check: VResources, Msg: fmt.Sprintf(
			"%d goroutines %v after Close, baseline %d (+%d allowed); stacks (truncated):\n%s", n, goroutineWait, baseG, goroutineSlack, stacks[:min(len(stacks), 64<<10)])})
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > baseHeap+heapSlack {
		vs = append(vs, Violation{Check: VResources, Msg: fmt.Sprintf(
			"heap %d MB after Close and GC, baseline %d MB (+%d MB allowed)%s", ms.HeapAlloc>>20, baseHeap>>20, heapSlack>>20, heapProfile(dump))})
	}
	return vs
}

// heapProfile writes a heap profile next to the run's dump (when there is
// one), for a heap found over its bound, and says where.
func heapProfile(dump string) string {
	if dump == "" {
		return ""
	}
	f, err := os.Create(dump + ".heap")
	if err != nil {
		return fmt.Sprintf(" (heap profile: %v)", err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Sprintf(" (heap profile: %v)", err)
	}
	return "; heap profile in " + f.Name()
}
