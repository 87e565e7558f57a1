-- semaphore_set.lua: set the number of permits unless it is already set.
--
-- KEYS[1]  the semaphore count
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits
-- ARGV[2]  the publish command
--
-- Returns 1 when the count was set (and published), 0 when it existed.
--[[publish]]
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
publish(ARGV[2], KEYS[2], ARGV[1])
return 1
