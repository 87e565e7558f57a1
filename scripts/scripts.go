package scripts

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Each script runs as EVALSHA with an EVAL fallback on NOSCRIPT
// (redis.Script.Run), so a flushed script cache costs one extra round trip.
// The .lua file of each states its KEYS, ARGV and replies. Splicing builds
// the scripts sent: fair_purge.lua goes into the fair scripts
// (withFairPurge), permit_reclaim.lua into the permit scripts
// (withPermitReclaim), publish.lua into every script that publishes
// (withPublish), and the state-changing scripts go into latch.lua
// (latched).

var (
	//go:embed lock.lua
	lockSrc string
	//go:embed unlock.lua
	unlockLua string
	//go:embed renew.lua
	renewSrc string
	//go:embed force_unlock.lua
	forceUnlockLua string
	//go:embed handoff.lua
	handoffSrc string
	//go:embed fenced_lock.lua
	fencedLockSrc string
	//go:embed fair_lock.lua
	fairLockLua string
	//go:embed fair_unlock.lua
	fairUnlockLua string
	//go:embed fair_cancel.lua
	fairCancelLua string
	//go:embed fair_force_unlock.lua
	fairForceUnlockLua string
	//go:embed fair_purge.lua
	fairPurgeLua string
	//go:embed read_lock.lua
	readLockSrc string
	//go:embed read_unlock.lua
	readUnlockLua string
	//go:embed write_lock.lua
	writeLockSrc string
	//go:embed write_unlock.lua
	writeUnlockLua string
	//go:embed rw_renew.lua
	rwRenewSrc string
	//go:embed rw_force_unlock.lua
	rwForceUnlockLua string
	//go:embed semaphore_acquire.lua
	semaphoreAcquireSrc string
	//go:embed semaphore_release.lua
	semaphoreReleaseLua string
	//go:embed semaphore_set.lua
	semaphoreSetLua string
	//go:embed permit_reclaim.lua
	permitReclaimLua string
	//go:embed permit_acquire.lua
	permitAcquireLua string
	//go:embed permit_release.lua
	permitReleaseLua string
	//go:embed permit_update.lua
	permitUpdateLua string
	//go:embed permit_available.lua
	permitAvailableLua string
	//go:embed permit_add.lua
	permitAddLua string
	//go:embed countdown_set.lua
	countDownSetLua string
	//go:embed countdown_down.lua
	countDownDownLua string
	//go:embed publish.lua
	publishLua string
	//go:embed latch.lua
	latchSrc string
	//go:embed latch_resolve.lua
	latchResolveSrc string
	//go:embed latch_forget.lua
	latchForgetSrc string
)

// Reentrant lock (RedissonLock); FencedLock and FairLock share Unlock and Renew.
var (
	Lock        = redis.NewScript(lockSrc)        // one hold; lock.lua
	Unlock      = redis.NewScript(unlockSrc)      // release one hold; unlock.lua
	Renew       = redis.NewScript(renewSrc)       // watchdog renewal; renew.lua
	ForceUnlock = redis.NewScript(forceUnlockSrc) // delete whoever holds; force_unlock.lua
	Handoff     = redis.NewScript(handoffSrc)     // release and grant to a local waiter; handoff.lua
)

// FencedLock: a reentrant lock whose grants from zero holds issue a token.
var FencedLock = redis.NewScript(fencedLockSrc) // fenced_lock.lua

// The fair scripts with fair_purge.lua spliced in, the permit scripts with
// permit_reclaim.lua, and every script that publishes with publish.lua.
var (
	fairLockSrc        = withFairPurge(fairLockLua)
	fairUnlockSrc      = withPublish(withFairPurge(fairUnlockLua))
	fairCancelSrc      = withPublish(withFairPurge(fairCancelLua))
	fairForceUnlockSrc = withPublish(withFairPurge(fairForceUnlockLua))

	permitAcquireSrc   = withPublish(withPermitReclaim(permitAcquireLua))
	permitReleaseSrc   = withPublish(withPermitReclaim(permitReleaseLua))
	permitUpdateSrc    = withPublish(withPermitReclaim(permitUpdateLua))
	permitAvailableSrc = withPublish(withPermitReclaim(permitAvailableLua))
	permitAddSrc       = withPublish(permitAddLua)

	unlockSrc           = withPublish(unlockLua)
	forceUnlockSrc      = withPublish(forceUnlockLua)
	readUnlockSrc       = withPublish(readUnlockLua)
	writeUnlockSrc      = withPublish(writeUnlockLua)
	rwForceUnlockSrc    = withPublish(rwForceUnlockLua)
	semaphoreReleaseSrc = withPublish(semaphoreReleaseLua)
	semaphoreSetSrc     = withPublish(semaphoreSetLua)
	countDownSetSrc     = withPublish(countDownSetLua)
	countDownDownSrc    = withPublish(countDownDownLua)
)

// FairLock (RedissonFairLock): FIFO across clients through a queue and deadlines.
var (
	FairLock        = redis.NewScript(fairLockSrc)        // fair_lock.lua
	FairUnlock      = redis.NewScript(fairUnlockSrc)      // fair_unlock.lua
	FairCancel      = redis.NewScript(fairCancelSrc)      // fair_cancel.lua
	FairForceUnlock = redis.NewScript(fairForceUnlockSrc) // fair_force_unlock.lua
)

// ReadWriteLock (RedissonReadWriteLock).
var (
	ReadLock      = redis.NewScript(readLockSrc)      // read_lock.lua
	ReadUnlock    = redis.NewScript(readUnlockSrc)    // read_unlock.lua
	WriteLock     = redis.NewScript(writeLockSrc)     // write_lock.lua
	WriteUnlock   = redis.NewScript(writeUnlockSrc)   // write_unlock.lua
	RWRenew       = redis.NewScript(rwRenewSrc)       // rw_renew.lua
	RWForceUnlock = redis.NewScript(rwForceUnlockSrc) // rw_force_unlock.lua
)

// Semaphore (RedissonSemaphore).
var (
	SemaphoreAcquire = redis.NewScript(semaphoreAcquireSrc) // semaphore_acquire.lua
	SemaphoreRelease = redis.NewScript(semaphoreReleaseSrc) // semaphore_release.lua
	SemaphoreSet     = redis.NewScript(semaphoreSetSrc)     // semaphore_set.lua
)

// PermitSemaphore (RedissonPermitExpirableSemaphore): TrySetPermits runs
// SemaphoreSet on the same count key.
var (
	PermitAcquire   = redis.NewScript(permitAcquireSrc)   // permit_acquire.lua
	PermitAdd       = redis.NewScript(permitAddSrc)       // permit_add.lua
	PermitRelease   = redis.NewScript(permitReleaseSrc)   // permit_release.lua
	PermitUpdate    = redis.NewScript(permitUpdateSrc)    // permit_update.lua; unlatched
	PermitAvailable = redis.NewScript(permitAvailableSrc) // permit_available.lua; unlatched
)

// Latched holds the state-changing scripts above wrapped by latch.lua, which
// makes each safe to send twice: they take the body's KEYS and ARGV followed
// by the latch key (KEYS) and the request's sequence number and the latch's
// lifetime in ms (ARGV). A CountDownLatch's scripts (countdown_set.lua,
// countdown_down.lua) exist only latched: a count-down sent twice would
// count twice. Renewals and force unlocks need no latch: running
// them twice changes nothing.
var Latched = struct {
	Lock, FencedLock, Unlock, Handoff                *redis.Script
	FairLock, FairUnlock                             *redis.Script
	ReadLock, ReadUnlock, WriteLock, WriteUnlock     *redis.Script
	SemaphoreAcquire, SemaphoreRelease, SemaphoreSet *redis.Script
	PermitAcquire, PermitAdd, PermitRelease          *redis.Script
	CountDownSet, CountDownDown                      *redis.Script
}{
	Lock:             latched(lockSrc),
	FencedLock:       latched(fencedLockSrc),
	Unlock:           latched(unlockSrc),
	Handoff:          latched(handoffSrc),
	FairLock:         latched(fairLockSrc),
	FairUnlock:       latched(fairUnlockSrc),
	ReadLock:         latched(readLockSrc),
	ReadUnlock:       latched(readUnlockSrc),
	WriteLock:        latched(writeLockSrc),
	WriteUnlock:      latched(writeUnlockSrc),
	SemaphoreAcquire: latched(semaphoreAcquireSrc),
	SemaphoreRelease: latched(semaphoreReleaseSrc),
	SemaphoreSet:     latched(semaphoreSetSrc),
	PermitAcquire:    latched(permitAcquireSrc),
	PermitAdd:        latched(permitAddSrc),
	PermitRelease:    latched(permitReleaseSrc),
	CountDownSet:     latched(countDownSetSrc),
	CountDownDown:    latched(countDownDownSrc),
}

// The latch's own scripts.
var (
	Resolve     = redis.NewScript(latchResolveSrc) // did a request run? latch_resolve.lua
	ForgetLatch = redis.NewScript(latchForgetSrc)  // drop a settled latch; latch_forget.lua
)

// latched inserts body into latch.lua.
func latched(body string) *redis.Script {
	const marker = "--[[body]]"
	if !strings.Contains(latchSrc, marker) {
		panic("scripts: latch.lua lost its body marker")
	}
	return redis.NewScript(strings.Replace(latchSrc, marker, body, 1))
}

// The marker lines that withFairPurge, withPermitReclaim and withPublish
// replace.
const (
	fairPurgeMarker     = "--[[fair_purge]]"
	permitReclaimMarker = "--[[permit_reclaim]]"
	publishMarker       = "--[[publish]]"
)

// withFairPurge puts the code of fair_purge.lua in place of host's one
// fair_purge marker line.
func withFairPurge(host string) string { return spliced(host, fairPurgeMarker, fairPurgeLua) }

// withPermitReclaim puts the code of permit_reclaim.lua in place of host's
// one permit_reclaim marker line.
func withPermitReclaim(host string) string {
	return spliced(host, permitReclaimMarker, permitReclaimLua)
}

// withPublish puts the publish function of publish.lua in place of host's
// one publish marker line: every publish goes through it, so that a server
// refusing it fails no script halfway.
func withPublish(host string) string { return spliced(host, publishMarker, publishLua) }

// spliced puts snippet's code in place of host's one marker line, leaving
// out the comment lines the snippet opens with: they tell a reader what the
// code expects in scope, which the host's own header already covers, and
// Redis has no use for them. A host without exactly one marker line is a
// bug in this package: it panics when the package loads.
func spliced(host, marker, snippet string) string {
	var out strings.Builder
	n := 0
	for line := range strings.Lines(host) {
		if strings.TrimSuffix(line, "\n") == marker {
			n++
			out.WriteString(snippetCode(snippet))
			continue
		}
		out.WriteString(line)
	}
	if n != 1 {
		panic("scripts: a script has no " + marker + " line, or more than one")
	}
	return out.String()
}

// snippetCode is a snippet without the comment lines it opens with.
func snippetCode(snippet string) string {
	code := snippet
	for strings.HasPrefix(code, "--") {
		_, code, _ = strings.Cut(code, "\n")
	}
	return code
}
