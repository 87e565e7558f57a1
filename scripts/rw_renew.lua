-- rw_renew.lua: the watchdog's renewal of one owner's read or write holds.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  this owner's hold-key prefix, {name}:<owner>:rwlock_timeout
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the field renewed: owner (read holds) or owner:write
-- ARGV[3]  "1" to renew the owner's read hold keys too (read field)
--
-- Returns 1 when the field exists and the lease was re-applied (to the hash
-- and to this owner's own hold keys only), 0 when the owner no longer holds.
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if holds == nil then
    return 0
end
redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
if ARGV[3] == '1' then
    for i = holds, 1, -1 do
        redis.call('pexpire', KEYS[2] .. ':' .. i, ARGV[1])
    end
end
return 1
