-- permit_reclaim.lua: a snippet, not a script: scripts.go splices it into
-- permit_acquire.lua, permit_release.lua, permit_update.lua and
-- permit_available.lua in place of their permit_reclaim marker line,
-- leaving out this header.
--
-- It expects in scope:
-- KEYS[1]  the semaphore count
-- KEYS[2]  the permits' deadlines, {name}:timeout (see permit_acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- pub      a local the host sets first: its publish command argument
-- publish  the function publish.lua defines
--
-- Gives back the permits whose leases have ended (deadline <= now on the
-- server's clock): removes them from the deadlines, adds their number to
-- the count and, when the count is then above zero, publishes it. It
-- leaves two locals for the host: now, the server's time in ms, and
-- reclaimed, the count after giving permits back (nil when none had
-- ended).
redis.replicate_commands()
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reclaimed
local expired = redis.call('zrangebyscore', KEYS[2], '-inf', now)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    reclaimed = redis.call('incrby', KEYS[1], #expired)
    if reclaimed > 0 then
        publish(pub, KEYS[3], reclaimed)
    end
end
