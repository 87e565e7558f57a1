-- permit_add.lua: AddPermits of a permit semaphore: add permits (n may be
-- negative) and, when n is positive, tell waiters how many were added.
--
-- KEYS[1]  the semaphore count (see permit_acquire.lua)
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits to add, a decimal integer; may be negative
-- ARGV[2]  the publish command
--
-- Returns the count now available. Only a positive n is published, and it
-- is n itself, not the count: a Java Redisson waiter releases as many local
-- waiters as the message says, and throws on a negative number.
--[[publish]]
local count = redis.call('incrby', KEYS[1], ARGV[1])
if tonumber(ARGV[1]) > 0 then
    publish(ARGV[2], KEYS[2], ARGV[1])
end
return count
