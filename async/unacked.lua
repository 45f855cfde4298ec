-- unacked.lua counts the units of the entries of a voucher's (shard's)
-- stream that the consumer group has not acknowledged: pending, or after
-- its last delivered entry (every entry when there is no group yet). A
-- reload of the voucher's other shards counts them as held: they are not
-- in MySQL's remaining yet. An entry counts its quantity (field q, absent:
-- 1), not one.
--
-- KEYS[1] orders stream
-- ARGV[1] consumer group
--
-- Returns the units.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
-- after reports whether stream id a sorts after b.
local function after(a, b)
  local ams, aseq = string.match(a, '(%d+)-(%d+)')
  local bms, bseq = string.match(b, '(%d+)-(%d+)')
  ams, bms = tonumber(ams), tonumber(bms)
  if ams ~= bms then
    return ams > bms
  end
  return tonumber(aseq) > tonumber(bseq)
end
local last, pending = '0-0', {}
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #g, 2 do
    info[g[i]] = g[i + 1]
  end
  if info['name'] == ARGV[1] then
    last = info['last-delivered-id']
    for _, p in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', info['pending'] + 1)) do
      pending[p[1]] = true
    end
  end
end
local units = 0
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  if pending[e[1]] or after(e[1], last) then
    local q = 1
    for i = 1, #e[2], 2 do
      if e[2][i] == 'q' then q = tonumber(e[2][i + 1]) end
    end
    units = units + q
  end
end
return units
