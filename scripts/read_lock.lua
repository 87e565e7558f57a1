-- read_lock.lua: take one read hold of a read-write lock.
--
-- KEYS[1]  the lock hash: mode -> "read"|"write", <owner> -> read holds,
--          <owner>:write -> write holds
-- KEYS[2]  this owner's hold-key prefix, {name}:<owner>:rwlock_timeout; read
--          hold i lives in "<prefix>:<i>" with the lease as its TTL
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner (the read field)
-- ARGV[3]  owner:write (the write field of the same owner)
--
-- Granted when nobody holds the lock, when it is in read mode, or when this
-- owner holds the write lock (write-then-read reentry). Returns nil when
-- granted, else the holder's PTTL in ms.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
if mode == false or mode == 'read' or redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local hold = KEYS[2] .. ':' .. n
    redis.call('set', hold, 1, 'px', ARGV[1])
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
    return nil
end
return redis.call('pttl', KEYS[1])
