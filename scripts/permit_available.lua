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
--[[publish]]
local pub = ARGV[1]
--[[permit_reclaim]]
if reclaimed then
    return reclaimed
end
return tonumber(redis.call('get', KEYS[1]) or '0')
