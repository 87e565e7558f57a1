// Package redistest is a test fixture that runs real redis-server processes
// for tests, so lock and RedLock code can be exercised against the genuine
// server, including faults: a killed server (Kill), a frozen one (Pause and
// Resume) and one that comes back on the same port (Restart).
//
// Each [Start] launches its own redis-server on a free 127.0.0.1 port picked
// by the kernel, with persistence off, its working directory in
// tb.TempDir(), and a tb.Cleanup that stops it. The child is put in its own
// process group and gets SIGKILL if the thread that started it dies
// (Pdeathsig), so a crashed test binary does not leave servers behind. Every
// process has exactly one goroutine (the one in exec.Cmd.Wait) and that
// goroutine ends when the process exits; after cleanup nothing of this
// package is left running, so callers may use goleak.VerifyTestMain.
//
// If redis-server is not on PATH, Start falls back to an in-process
// miniredis (with real-time TTLs via ClockTTL) and logs that it did; fault
// methods then skip the test. Set LOCKACTOR_REQUIRE_REDIS=1 to make a
// missing redis-server a test failure instead (for CI).
//
// What this package must never do: use a fixed or well-known port (6379 or
// any other), or signal, stop, connect to or otherwise touch a redis-server
// it did not start itself. Other redis-servers run on the same machines; a
// port that answers but belongs to another process is treated as stolen and
// a new port is chosen. Signals go only to the process groups of children
// started here.
//
// [NewProxy] puts a fault-injecting TCP proxy between a client and a server,
// for faults of the network rather than of the server: a connection that
// goes silent while the server is fine (Freeze), one that is reset (Cut), and
// a reply lost after its command ran (CutAfter).
//
// Replication fixtures, with no miniredis fallback (they skip without
// redis-server, or fail under LOCKACTOR_REQUIRE_REDIS=1): [StartReplicated]
// is a master and a replica, cheap enough for one per round
// ([StartReplicatedLinked] routes the replication link through a Proxy so
// a replica can really lag); [StartSentinel] adds three sentinels with
// graceful and crash failover ([StartSentinelReplicas]: with n replicas,
// which the sentinels re-point at whichever they promote);
// [StartClusterReplicas] is a cluster whose
// masters have a replica each, with [Cluster.Failover] and
// [Cluster.MoveSlot].
//
// The package is Linux-only (it relies on Pdeathsig and /proc).
package redistest
