-- permit_acquire.lua: take one permit of a permit semaphore, with an id and
-- a lease, after giving back the permits whose leases have ended.
--
-- KEYS[1]  the semaphore: a decimal count of available permits, no TTL
-- KEYS[2]  the permits' deadlines, {name}:timeout: a sorted set whose members
--          are the permit ids (16 raw bytes) scored by their deadline, in ms
--          of the Redis server's clock
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id, 16 raw bytes (chosen by the caller, so that a
--          replayed request names the same permit)
-- ARGV[2]  the lease in ms (> 0)
-- ARGV[3]  the publish command
--
-- A permit whose id is held already is not taken again: a request retried
-- under a new latch sequence (its first outcome was unknown) takes one
-- permit, not two.
--
-- Returns {1, 0} when the permit was taken (or held already); else {0, ms} where ms is the time
-- until the earliest lease of a permit held ends (when one will come back
-- without a release), or -1 when no permit is held. Expired permits given
-- back are announced with the count now available.
--[[publish]]
local pub = ARGV[3]
--[[permit_reclaim]]
if redis.call('zscore', KEYS[2], ARGV[1]) ~= false then
    return {1, 0}
end
local have = tonumber(redis.call('get', KEYS[1]) or '0')
if have >= 1 then
    redis.call('decr', KEYS[1])
    redis.call('zadd', KEYS[2], string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
    return {1, 0}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] == nil then
    return {0, -1}
end
return {0, math.max(tonumber(first[2]) - now, 0)}
