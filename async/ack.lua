-- ack.lua acknowledges persisted entries and trims the stream below the
-- oldest entry some consumer group still needs: the oldest pending entry of
-- each group, or, for a group with none pending, its last delivered entry
-- (everything before it was delivered and acknowledged). Redis 7.0 has no
-- XACKDEL, and XTRIM MAXLEN would drop entries nobody has persisted.
--
-- KEYS[1] orders stream
-- ARGV[1] consumer group, ARGV[2..] entry ids (none: just trim)
--
-- Returns {entries acknowledged, entries trimmed}.
local acked = 0
if #ARGV > 1 then
  acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
end

-- before reports whether stream id a sorts before b.
local function before(a, b)
  local ams, aseq = string.match(a, '(%d+)-(%d+)')
  local bms, bseq = string.match(b, '(%d+)-(%d+)')
  ams, bms = tonumber(ams), tonumber(bms)
  if ams ~= bms then
    return ams < bms
  end
  return tonumber(aseq) < tonumber(bseq)
end

local keep = nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local name, last, pending
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1]
    elseif g[i] == 'last-delivered-id' then last = g[i + 1]
    elseif g[i] == 'pending' then pending = g[i + 1] end
  end
  local need = last
  if pending > 0 then
    need = redis.call('XPENDING', KEYS[1], name)[2]
  end
  if keep == nil or before(need, keep) then
    keep = need
  end
end
local trimmed = 0
if keep ~= nil then
  trimmed = redis.call('XTRIM', KEYS[1], 'MINID', keep)
end
return {acked, trimmed}
