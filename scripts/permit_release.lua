-- permit_release.lua: give back the permit with the given id, after giving
-- back the permits whose leases have ended.
--
-- KEYS[1]  the semaphore count
-- KEYS[2]  the permits' deadlines, {name}:timeout (see permit_acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  the publish command
--
-- Returns 1 when the permit was held and is given back, 0 when it was not
-- held (never acquired, released already, or its lease had ended: then it
-- came back to the pool without this release). Each change of the count is
-- published with the count now available.
--[[publish]]
local pub = ARGV[2]
--[[permit_reclaim]]
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then
    return 0
end
local count = redis.call('incr', KEYS[1])
publish(pub, KEYS[3], count)
return 1
