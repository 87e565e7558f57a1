-- permit_available.lua: the permits available now, after giving back the
-- permits whose leases have ended (as Redisson does). Running it twice gives
-- back nothing more, so it needs no latch.
--
-- KEYS[1]  the semaphore count
-- KEYS[2]  the permits' deadlines, {name}:timeout (see permit_acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the publish command
--
-- Returns the count available (0 when it was never set); permits given back
-- are announced with that count.
redis.replicate_commands()
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('zrangebyscore', KEYS[2], '-inf', now)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local count = redis.call('incrby', KEYS[1], #expired)
    if count > 0 then
        redis.call(ARGV[1], KEYS[3], count)
    end
    return count
end
return tonumber(redis.call('get', KEYS[1]) or '0')
