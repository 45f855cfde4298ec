-- takeover.lua takes over the entries pending on one consumer that is
-- gone (its heartbeat expired: it died, see heartbeat.go), and returns
-- them with their delivery counts. Only entries idle for the minimum are
-- taken, so one its consumer read just before it was last seen alive
-- stays with it.
--
-- KEYS[1] orders stream
-- ARGV[1] consumer group, ARGV[2] this consumer, ARGV[3] the dead
-- consumer, ARGV[4] minimum idle time in ms, ARGV[5] how many at most
--
-- Returns {entries, delivery counts (parallel to entries), ids of pending
-- entries no longer in the stream (XCLAIM drops them from the group)}.
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[4], '-', '+', ARGV[5], ARGV[3])
if #pending == 0 then
  return {{}, {}, {}}
end
local ids, counts = {}, {}
for i, p in ipairs(pending) do
  ids[i] = p[1]
  counts[p[1]] = p[4] + 1 -- XCLAIM counts a delivery
end
local entries = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[4], unpack(ids))
local out, got = {}, {}
for i, e in ipairs(entries) do
  out[i] = counts[e[1]]
  got[e[1]] = true
end
local gone = {}
for _, id in ipairs(ids) do
  if not got[id] then
    table.insert(gone, id)
  end
end
return {entries, out, gone}
