-- rw_force_unlock.lua: delete a read-write lock held in one mode.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  the mode to delete: "read" or "write"
-- ARGV[2]  the publish command
--
-- Returns 1 when the lock was in that mode and was deleted (waiters woken
-- with "1"), else 0. Hold keys of read holds expire on their own.
--[[publish]]
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then
    return 0
end
redis.call('del', KEYS[1])
publish(ARGV[2], KEYS[2], '1')
return 1
