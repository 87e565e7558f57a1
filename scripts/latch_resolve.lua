-- latch_resolve.lua: settle a request whose reply was lost: did it run?
--
-- KEYS[1]  the latch, lockactor_latch:{name}:<clientUUID>:<kind> (see latch.lua)
-- ARGV[1]  the request's sequence number
-- ARGV[2]  how long the latch is kept, in ms
--
-- Returns {1, code} when the request ran, code being its recorded reply (see
-- latch.lua for the encoding); {0} when it did not (a cancellation or a
-- newer request is recorded); {2} when the latch holds no record at all,
-- which means "did not run" only while a record of it would still live:
-- the caller knows when it sent the request and how long its record lives.
-- A request that had not run is cancelled here, in the same step: a copy of
-- it that reaches the server later changes nothing, so "did not run" stays
-- true. "Ran" renews the record's life, a write, so that a WAIT after this
-- script measures a write of its own on every Redis version.
local kept = redis.call('get', KEYS[1])
if kept then
    local at = string.find(kept, ':', 1, true)
    local ran, code = tonumber(string.sub(kept, 1, at - 1)), string.sub(kept, at + 1)
    if ran == tonumber(ARGV[1]) and code ~= 'c' then
        redis.call('pexpire', KEYS[1], ARGV[2])
        return {1, code}
    end
    if ran >= tonumber(ARGV[1]) then
        return {0}
    end
    redis.call('set', KEYS[1], ARGV[1] .. ':c', 'px', ARGV[2])
    return {0}
end
redis.call('set', KEYS[1], ARGV[1] .. ':c', 'px', ARGV[2])
return {2}
