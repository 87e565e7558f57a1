-- semaphore_release.lua: add permits (a release, or AddPermits with any
-- sign) and tell waiters how many are available now.
--
-- KEYS[1]  the semaphore count
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits to add (may be negative for AddPermits)
-- ARGV[2]  the publish command
--
-- Returns the count now available; the same count is published.
--[[publish]]
local now = redis.call('incrby', KEYS[1], ARGV[1])
publish(ARGV[2], KEYS[2], now)
return now
