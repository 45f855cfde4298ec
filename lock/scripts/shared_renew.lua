-- renew: set the caller's lease to ARGV[3] ms from now if it still holds.
-- Returns 1 if it does, else 0.

-- #include shared_common.lua

local s = redis.call('ZSCORE', holders, token)
if not s or tonumber(s) <= now then return 0 end
local deadline = now + tonumber(ARGV[3])
redis.call('ZADD', holders, 'XX', deadline, token)
keepUntil(deadline)
if redis.call('GET', owner) == token then redis.call('PEXPIREAT', owner, deadline) end
return 1
