-- renew.lua: the watchdog's renewal of a held lock.
--
-- KEYS[1]  the lock hash: field <owner> -> hold count
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner, "<clientUUID>:<handleID>"
--
-- Returns 1 when the owner's field exists and the lease was re-applied, 0 when
-- the owner no longer holds the lock (it must never extend someone else's).
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
