package redisio

import "strings"

// prefixed is the name of an auxiliary key or channel that lives in the same
// Cluster slot as the lock: "prefix:{name}", or "prefix:name" when the name
// already carries its own hash tag.
func prefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// suffixBase is what suffixed puts before ":suffix".
func suffixBase(name string) string {
	if strings.Contains(name, "{") {
		return name
	}
	return "{" + name + "}"
}

// suffixed is the other form of auxiliary key Redisson uses: "{name}:suffix",
// or "name:suffix" when the name already carries its own hash tag.
func suffixed(name, suffix string) string { return suffixBase(name) + ":" + suffix }

// LockChannel is the channel on which a reentrant lock announces its release.
func LockChannel(name string) string { return prefixed("redisson_lock__channel", name) }

// ListenerMark is the channel a lockactor Client subscribes to beside a
// lock's channel, for as long as it listens there, on the same connection.
// Nothing is ever published on it: its subscriber count tells lockactor's
// listeners from others (a Redisson client waiting on the lock), which
// listen on the lock's channel only. It shares the channel's hash tag, so
// a sharded Cluster keeps both on one master.
func ListenerMark(channel string) string { return "lockactor_listening:" + channel }

// UnlockMessage is the payload published when a lock is released or deleted.
const UnlockMessage = "0"

// tokenKey is a fenced lock's token counter.
func tokenKey(name string) string { return prefixed("redisson_lock_token", name) }

// FairQueue is a fair lock's list of waiting owners.
func FairQueue(name string) string { return prefixed("redisson_lock_queue", name) }

// FairTimeouts is a fair lock's zset of waiter deadlines.
func FairTimeouts(name string) string { return prefixed("redisson_lock_timeout", name) }

// FairChannel is the channel on which one fair-lock waiter is told its turn.
func FairChannel(name, owner string) string { return LockChannel(name) + ":" + owner }

// RWChannel is a read-write lock's channel.
func RWChannel(name string) string { return prefixed("redisson_rwlock", name) }

// rwHoldPrefix is the prefix of an owner's read-hold keys: hold i lives in
// "<prefix>:<i>".
func rwHoldPrefix(name, owner string) string { return suffixed(name, owner+":rwlock_timeout") }

// SemaphoreChannel is a semaphore's channel; messages carry the count available.
func SemaphoreChannel(name string) string { return prefixed("redisson_sc", name) }

// Read-write lock messages: a read unlock wakes one waiter, a write unlock all.
const (
	readUnlockMessage  = "0"
	WriteUnlockMessage = "1"
)

// PermitTimeouts is a permit semaphore's sorted set of held permit ids scored
// by their lease deadlines: "{name}:timeout", as Redisson names it.
func PermitTimeouts(name string) string { return suffixed(name, "timeout") }

// CountDownChannel is a CountDownLatch's channel, named as Redisson names it
// (the prefix, then the name in braces, also when the name has braces of its
// own): it carries CountDownZero and CountDownNew.
func CountDownChannel(name string) string {
	return "redisson_countdownlatch__channel__{" + name + "}"
}

// The CountDownLatch messages: the count reached zero, a new count was set.
const (
	CountDownZero = "0"
	CountDownNew  = "1"
)
