-- permit_update.lua: give a held permit a new lease, counted from now, after
-- giving back the permits whose leases have ended. Running it twice sets the
-- same lease again, so it needs no latch.
--
-- KEYS[1]  the semaphore count
-- KEYS[2]  the permits' deadlines, {name}:timeout (see permit_acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  the new lease in ms (> 0)
-- ARGV[3]  the publish command
--
-- Returns 1 when the permit was held and has its new lease, 0 when it was
-- not held (released, or its lease had ended).
--[[publish]]
local pub = ARGV[3]
--[[permit_reclaim]]
if redis.call('zscore', KEYS[2], ARGV[1]) == false then
    return 0
end
redis.call('zadd', KEYS[2], 'xx', string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
return 1
