-- unacked.lua (after entry.lua) lists the orders of a voucher's stream that the consumer
-- group has not acknowledged: not delivered yet, or delivered and pending.
-- Acknowledged entries left before the trim point are persisted or
-- dead-lettered, and are not listed.
--
-- KEYS[1] orders stream
-- ARGV[1] consumer group
--
-- Returns a flat list of order ids and their quantities (field q,
-- absent: 1).
local out = {}
local function add(entries)
  for _, e in ipairs(entries) do
    for _, o in ipairs(entry_orders(e[2])) do
      if o.order then
        out[#out + 1] = o.order
        out[#out + 1] = o.q
      end
    end
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return out
end
local last = nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #g, 2 do
    info[g[i]] = g[i + 1]
  end
  if info['name'] == ARGV[1] then
    last = info['last-delivered-id']
  end
end
if not last then
  add(redis.call('XRANGE', KEYS[1], '-', '+'))
  return out
end
add(redis.call('XRANGE', KEYS[1], '(' .. last, '+'))
local n = redis.call('XPENDING', KEYS[1], ARGV[1])[1]
if n > 0 then
  for _, p in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', n)) do
    add(redis.call('XRANGE', KEYS[1], p[1], p[1]))
  end
end
return out
