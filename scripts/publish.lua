-- publish.lua: a snippet, not a script: scripts.go splices it into every
-- script that announces a change, in place of the script's publish marker
-- line, leaving out this header.
--
-- Defines publish(command, channel, message): sends message on channel
-- with command ("publish", or "spublish" on a sharded cluster) and returns
-- true, or sends nothing and returns false when command is "" (none asked
-- for) or the server refuses the command (an ACL user denied the channel
-- or the command). A refusal must not fail the script: it comes after the
-- script's writes, which Redis does not undo, and a latched script that
-- fails halfway leaves no record, so the runtime's retry would apply those
-- writes again (a semaphore release counted six times, measured).
local function publish(command, channel, message)
    if command == '' then
        return false
    end
    local sent = redis.pcall(command, channel, message)
    return not (type(sent) == 'table' and sent.err ~= nil)
end
