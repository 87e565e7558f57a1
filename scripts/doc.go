// Package scripts holds the Lua scripts that change lock state in Redis, one
// script per .lua file, embedded at build time. Two files are snippets rather
// than scripts, spliced into their hosts where a marker line is:
// fair_purge.lua, the purge of dead waiters that the four fair scripts
// share, and permit_reclaim.lua, the return of expired permits that the four
// permit scripts share.
//
// Every state change happens inside one script so that it is atomic, and every
// key a script touches arrives in KEYS so that it runs on one Cluster node. The
// key layout and the messages published follow Redisson's, so Java Redisson
// clients on the same Redis exclude and wake lockactor clients and the other way
// round (redisio/keys.go names every key and channel). The state-changing scripts also run wrapped by
// latch.lua (package variable Latched), which records each request's reply so
// that a copy sent twice is applied once. This package must never hold logic
// beyond the scripts themselves: callers decide what the replies mean.
//
// It is part of lockactor's implementation, not an API: its exported names
// serve package redisio and lockactor's test suites only, and may change
// in any release.
package scripts
