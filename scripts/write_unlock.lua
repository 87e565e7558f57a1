-- write_unlock.lua: release one write hold of a read-write lock.
--
-- KEYS[1]  the lock hash (see read_lock.lua)
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  the message ("1": wake every waiter)
-- ARGV[2]  lease in ms, re-applied when write holds remain
-- ARGV[3]  owner:write
-- ARGV[4]  the publish command
--
-- Returns nil when the owner has no write hold, 0 when write holds remain, 1
-- when its last write hold went: the lock is deleted, or, when the owner
-- still has read holds (downgrade), set back to read mode. Both publish, so
-- waiting readers on every client learn that reading is possible.
--[[publish]]
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
publish(ARGV[4], KEYS[2], ARGV[1])
return 1
