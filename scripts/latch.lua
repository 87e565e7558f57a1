-- latch.lua: the wrapper that makes a state-changing script safe to run twice.
--
-- go-redis sends a command again after a broken connection, also when the
-- first copy already ran, and a copy can reach a server that was paused long
-- after its sender gave up. The wrapper records each run's reply under a
-- latch key, tagged with the request's sequence number, so a second copy of
-- the same request replays the recorded reply instead of changing the lock
-- twice, and an older copy changes nothing at all. The body is another
-- script of this package, inserted where the marker is; its own KEYS and ARGV
-- keep their numbers, and the wrapper's come after them:
--
-- KEYS[#KEYS]    the latch, lockactor_latch:{name}:<clientUUID>:<kind>: one
--                per lock name, Client and kind, whose actor runs one request
--                at a time
-- ARGV[#ARGV-1]  the request's sequence number: increases per Client
-- ARGV[#ARGV]    how long the latch is kept, in ms
--
-- Returns the body's reply, run or replayed, except that a nil reply goes
-- out as the status reply "LOCKACTOR_NIL" (go-redis turns a nil reply into
-- an error, and every error reply costs a client some twenty allocations
-- in its retry checks; redisio turns the status back into a nil reply); an
-- error reply "LOCKACTOR_SKIPPED" when a newer request has run or this one
-- was cancelled (latch_resolve.lua), in which case nothing changed.
local latch = KEYS[#KEYS]
local seq = ARGV[#ARGV - 1]

-- A reply is kept as "<seq>:<code>": n (nil), i<int> or a<int>,<int>,...;
-- "c" marks a request cancelled before it ran.
local kept = redis.call('get', latch)
if kept then
    local at = string.find(kept, ':', 1, true)
    local ran = tonumber(string.sub(kept, 1, at - 1))
    if ran >= tonumber(seq) then
        local code = string.sub(kept, at + 1)
        if ran > tonumber(seq) or code == 'c' then
            return redis.error_reply('LOCKACTOR_SKIPPED request ' .. seq)
        end
        -- The same request again: replay its reply. Renewing the record's
        -- life is a write, so that a WAIT after this copy measures a write
        -- of its own (Redis 7.2+ counts only propagated writes).
        redis.call('pexpire', latch, ARGV[#ARGV])
        local kind = string.sub(code, 1, 1)
        if kind == 'i' then
            return tonumber(string.sub(code, 2))
        elseif kind == 'a' then
            local out = {}
            for part in string.gmatch(string.sub(code, 2), '[^,]+') do
                out[#out + 1] = tonumber(part)
            end
            return out
        end
        return {ok = 'LOCKACTOR_NIL'}
    end
end

local function body()
--[[body]]
end

local reply = body()
local code = 'n'
if type(reply) == 'number' then
    code = 'i' .. string.format('%d', reply)
elseif type(reply) == 'table' then
    local parts = {}
    for i = 1, #reply do
        parts[i] = string.format('%d', reply[i])
    end
    code = 'a' .. table.concat(parts, ',')
end
redis.call('set', latch, seq .. ':' .. code, 'px', ARGV[#ARGV])
if code == 'n' then
    return {ok = 'LOCKACTOR_NIL'}
end
return reply
