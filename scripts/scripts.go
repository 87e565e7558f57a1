package scripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lock.lua
	lockSrc string
	//go:embed unlock.lua
	unlockSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed force_unlock.lua
	forceUnlockSrc string
)

// Reentrant lock scripts. Each runs as EVALSHA with an EVAL fallback on NOSCRIPT
// (redis.Script.Run), so a flushed script cache costs one extra round trip.
var (
	// Lock takes one hold; see lock.lua for KEYS, ARGV and the reply.
	Lock = redis.NewScript(lockSrc)
	// Unlock releases one hold; see unlock.lua.
	Unlock = redis.NewScript(unlockSrc)
	// Renew re-applies the lease while the owner holds; see renew.lua.
	Renew = redis.NewScript(renewSrc)
	// ForceUnlock deletes the lock whoever holds it; see force_unlock.lua.
	ForceUnlock = redis.NewScript(forceUnlockSrc)
)
