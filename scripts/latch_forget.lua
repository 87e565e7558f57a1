-- latch_forget.lua: drop a latch once its last request is settled.
--
-- KEYS[1]  the latch, lockactor_latch:{name}:<clientUUID>:<kind> (see latch.lua)
-- ARGV[1]  the sequence number of the Client's last request on this name
--
-- Deletes the latch only if it still records that request (or an older
-- one), so a newer request's record is never lost. Returns 1 if deleted.
local kept = redis.call('get', KEYS[1])
if not kept then
    return 0
end
local at = string.find(kept, ':', 1, true)
if tonumber(string.sub(kept, 1, at - 1)) > tonumber(ARGV[1]) then
    return 0
end
redis.call('del', KEYS[1])
return 1
