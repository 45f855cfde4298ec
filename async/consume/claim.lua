-- claim.lua takes over entries another consumer was delivered and has left
-- idle for too long (it died or hangs), and returns them with their
-- delivery counts, which XAUTOCLAIM alone does not return.
--
-- KEYS[1] orders stream
-- ARGV[1] consumer group, ARGV[2] this consumer, ARGV[3] minimum idle time
-- in ms, ARGV[4] cursor (start id), ARGV[5] how many at most
--
-- Returns {next cursor, entries, delivery counts (parallel to entries),
-- ids of pending entries no longer in the stream}.
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], 'COUNT', ARGV[5])
local entries = r[2]
local counts = {}
if #entries > 0 then
  local byID = {}
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], entries[1][1], entries[#entries][1], #entries, ARGV[2])
  for _, p in ipairs(pending) do
    byID[p[1]] = p[4]
  end
  for i, e in ipairs(entries) do
    counts[i] = byID[e[1]] or 0
  end
end
return {r[1], entries, counts, r[3] or {}}
