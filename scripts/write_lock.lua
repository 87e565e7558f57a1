-- write_lock.lua: take one write hold of a read-write lock.
--
-- KEYS[1]  the lock hash (see read_lock.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner:write (the write field)
-- ARGV[3]  owner (the read field of the same owner)
--
-- Returns nil when granted (free, or reentry by the write holder), -3 when
-- this owner holds only read holds (a read-to-write upgrade would wait for
-- itself forever), else the holder's PTTL in ms.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
    return nil
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return -3
end
return redis.call('pttl', KEYS[1])
