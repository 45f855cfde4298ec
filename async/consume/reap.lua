-- reap.lua deletes consumers of a group that hold no pending entries and
-- have been idle for long (processes that are gone; every process has a
-- consumer of its own). Deleting one that is alive is harmless: its next
-- read creates it again. One with pending entries is never deleted, which
-- would drop its entries from the group.
--
-- KEYS[1] orders stream
-- ARGV[1] consumer group, ARGV[2] minimum idle time in ms
--
-- Returns the number of consumers deleted.
local n = 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local info = {}
  for i = 1, #c, 2 do
    info[c[i]] = c[i + 1]
  end
  if info['pending'] == 0 and info['idle'] >= tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info['name'])
    n = n + 1
  end
end
return n
