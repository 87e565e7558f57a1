-- semaphore_acquire.lua: take permits if enough are available.
--
-- KEYS[1]  the semaphore: a decimal count of available permits, no TTL
-- ARGV[1]  permits wanted (> 0)
--
-- Returns 1 when the permits were taken, else 0 (nothing changes).
local have = tonumber(redis.call('get', KEYS[1]) or '0')
if have >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
