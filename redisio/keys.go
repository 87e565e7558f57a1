package redisio

import "strings"

// Prefixed is the name of an auxiliary key or channel that lives in the same
// Cluster slot as the lock: "prefix:{name}", or "prefix:name" when the name
// already carries its own hash tag.
func Prefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// Suffixed is the other form of auxiliary key Redisson uses: "{name}:suffix",
// or "name:suffix" when the name already carries its own hash tag.
func Suffixed(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// LockChannel is the channel on which a reentrant lock announces its release.
func LockChannel(name string) string { return Prefixed("redisson_lock__channel", name) }

// UnlockMessage is the payload published when a lock is released or deleted.
const UnlockMessage = "0"
