// Package torture is lockactor's lock-torture suite, in the spirit of Linux's
// locktorture and Jepsen's checkers: a seeded random workload of every lock
// primitive runs against real redis-server processes while faults are
// injected, every call and every critical section is written to an event log,
// and a checker decides over the whole log whether safety (mutual exclusion,
// the permit bound, fencing) and liveness held.
//
// The package has two halves that share only the log's types:
//
//   - the runner (Run, the workers, the fault Schedule, the go-redis Hook and
//     the injector), which drives the library through its public API only;
//   - the checker (Check and the Check* functions), pure functions over a Log,
//     unit-tested with small synthetic logs.
//
// Topologies: with Config.Topology set, the same workers and checks run
// against a Redis Cluster with replicas, a Sentinel group, or a master whose
// replica must confirm every grant, with that deployment's faults instead
// of the single-server schedule. Where a deployment may lose writes it had
// acknowledged (a crash failover, any Sentinel switch) CheckTopology relaxes
// the safety checks inside those windows only, and says so (Relaxations);
// elsewhere, and for every caller's answer, it is as strict as Check.
// SentinelStrictTopology is judged by CheckStrict instead,
// which relaxes no safety check there: a critical section counts until its
// holder's Lost closed, whatever failed over meanwhile.
//
// Determinism: a seed fixes every choice the suite makes (which primitive,
// name, call shape, deadline, critical section; the fault schedule and the
// fault hook's per-command draws). It cannot fix the interleaving of
// goroutines, Redis and the network, so a replayed seed runs the same
// workload and the same faults at the same times, not the same history.
//
// Why the checker is conservative where the log cannot be exact: a hold's
// start is when the grant reached the caller and its end is just before the
// caller asked to unlock, so the interval a checker sees is always inside the
// interval Redis really held it; an overlap of two such intervals is a real
// overlap. Where the log cannot tell what Redis did (a command whose reply was
// lost, a server that was killed), the checker cuts or excuses rather than
// guesses, and says so in the comments at each place.
package torture
