-- acquire and check: take a hold of kind ARGV[4] if it fits and nobody is
-- queued ahead of the caller; otherwise queue the caller if ARGV[5] is "1"
-- (keeping its place if it is queued, and telling the queue it is alive).
-- Returns 0, or the caller's grant (see shared_common.lua). Running it
-- twice with one token is harmless (rueidis may retry it).

-- #include shared_common.lua

purge()
local mine = held() or serve()
if mine then return mine end
local lease, kind = tonumber(ARGV[3]), ARGV[4]
if redis.call('EXISTS', queue) == 0 and free(kind) then
  return {grant(token, lease, kind), lease, 1}
end
if ARGV[5] == '1' then
  local member = token .. '/' .. ARGV[3] .. '/' .. kind
  redis.call('ZADD', queue, 'NX', clock[1] .. string.format('%06d', clock[2]), member)
  redis.call('ZADD', alive, now + queueTTL, member)
  redis.call('PEXPIRE', queue, queueTTL)
  redis.call('PEXPIRE', alive, queueTTL)
end
return 0
