-- ack.lua acknowledges persisted entries and trims the stream below the
-- oldest entry some consumer group still needs: the oldest pending entry of
-- each group, or, for a group with none pending, its last delivered entry
-- (everything before it was delivered and acknowledged). Redis 7.0 has no
-- XACKDEL, and XTRIM MAXLEN would drop entries nobody has persisted.
--
-- It also makes sure Redis records the buyer of every order just persisted.
-- It always does, but for one case: Redis lost the voucher's keys while a
-- consumer held a batch, and the voucher was reloaded from MySQL before the
-- batch was committed there. Its buyers would then be sold another order,
-- and their units sold again. A buyer Redis did not know takes the order's
-- units from the stock, as the gate would have (or what is left). An order
-- already returned (cancelled or expired before this ack) holds nothing.
--
-- While the meta hash is missing, a reload may hold a MySQL snapshot
-- taken before these orders were persisted, and they leave the stream
-- now: the fence changes (as return.lua changes it), and load.lua refuses
-- that snapshot.
--
-- The orders of the entries it acknowledges leave the backlog, meta's
-- queued (which the gate counts up): an entry is acknowledged with its
-- own XACK, so that one acknowledged before (by a consumer that took it
-- over meanwhile) is not counted twice.
--
-- KEYS[1] orders stream, KEYS[2] meta hash, KEYS[3] buyers hash,
-- KEYS[4] returned hash, KEYS[5] fence
-- ARGV[1] consumer group, ARGV[2] n, ARGV[3..2+2n] entry id, number of
-- orders pairs (none: just trim), then user id, order id, quantity triples
-- of the orders persisted
--
-- Returns {entries acknowledged, entries trimmed, buyers recorded}.
local n = tonumber(ARGV[2])
local loaded = redis.call('EXISTS', KEYS[2]) == 1
local acked, left = 0, 0
for i = 3, 2 + 2 * n, 2 do
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
    acked, left = acked + 1, left + tonumber(ARGV[i + 1])
  end
end
-- Keys loaded before queued existed count entries instead (backlog.lua).
if left > 0 and loaded and redis.call('HEXISTS', KEYS[2], 'queued') == 1 then
  redis.call('HINCRBY', KEYS[2], 'queued', -left)
end
local recorded = 0
-- One HMGET finds the buyers Redis records already (all, but for that
-- case): only the others cost more calls (issue 34: two calls per order
-- were a fifth of the consumer's Redis time).
local first, known = 3 + 2 * n, {}
if #ARGV >= first and loaded then
  local users = {}
  for i = first, #ARGV, 3 do
    users[#users + 1] = ARGV[i]
  end
  known = redis.call('HMGET', KEYS[3], unpack(users))
else
  first = #ARGV + 1 -- no orders, or no voucher: nothing to record
end
for i = first, #ARGV, 3 do
  if not known[(i - first) / 3 + 1] then
    local user, order, q = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
    if redis.call('HEXISTS', KEYS[4], order) == 0 and redis.call('HSETNX', KEYS[3], user, q .. ':' .. order) == 1 then
      recorded = recorded + 1
      if (tonumber(redis.call('HGET', KEYS[2], 'limit')) or 1) > 1 then
        redis.call('HINCRBY', KEYS[2], 'orders', 1)
      end
      local stock = tonumber(redis.call('HGET', KEYS[2], 'stock'))
      if stock > 0 then
        redis.call('HINCRBY', KEYS[2], 'stock', -math.min(q, stock))
      end
    end
  end
end
if not loaded and #ARGV > 2 + 2 * n then
  if redis.call('EXISTS', KEYS[5]) == 1 then
    redis.call('INCR', KEYS[5])
  else
    local t = redis.call('TIME')
    redis.call('SET', KEYS[5], t[1] .. string.rep('0', 6 - #t[2]) .. t[2])
  end
  redis.call('PEXPIRE', KEYS[5], 600000)
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
return {acked, trimmed, recorded}
