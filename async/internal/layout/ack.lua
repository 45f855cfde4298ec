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
-- It looks only at the orders whose entry was not still pending here
-- (issue 34: the look cost 2 to 3 µs of Redis per order). The gate wrote
-- an entry's buyers in the script that appended it, so an entry this
-- group still had pending brings its buyers along in any copy of the data
-- a failover or a restart leaves: they are in Redis, unless a reload
-- rebuilt the buyers since, which needs the meta hash gone, and then
-- load.lua counted the buyers of every order of the stream MySQL did not
-- hold. An entry that was not pending (lost with the stream, or from
-- before a rewind, or acknowledged by another consumer), and orders
-- passed without their entry, are looked at. So is every order of a
-- voucher whose limit is above 1: load.lua passes over a stream order
-- when the buyer's record names a later one, which a record from MySQL
-- does for an order persisted out of turn, so a reload can leave such an
-- order's units uncounted until its ack.
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
-- A caller that knows the limit is 1 may leave out the triples of an
-- entry's orders (lean): the entries that turn out not pending are then
-- returned, for it to pass their orders again, as others, at once (issue
-- 34: three arguments per order cost Redis about 1.5 µs, for a look that
-- nearly never happens).
--
-- KEYS[1] orders stream, KEYS[2] meta hash, KEYS[3] buyers hash,
-- KEYS[4] returned hash, KEYS[5] fence
-- ARGV[1] consumer group, ARGV[2] n, ARGV[3..2+4n] for each entry to
-- acknowledge: its id, its number of orders, p, the number of its orders
-- persisted now, and k, the triples of them that follow (p, or 0 when
-- lean); none: just trim; then user id, order id, quantity triples: the k
-- of each entry in turn, then orders persisted whose entry is not
-- acknowledged here
--
-- Returns {entries acknowledged, entries trimmed, buyers recorded, the
-- voucher's limit (0 when not loaded), then the ids of the entries left
-- lean that were not pending, whose orders must be looked at}.
local n = tonumber(ARGV[2])
local loaded = redis.call('EXISTS', KEYS[2]) == 1
local limit = tonumber(redis.call('HGET', KEYS[2], 'limit')) or 1
local acked, left, persisted = 0, 0, false
-- look lists the ARGV indexes of the triples whose buyers are looked at,
-- redo the lean entries whose orders the caller must send.
local look, redo, t = {}, {}, 3 + 4 * n
for i = 3, 2 + 4 * n, 4 do
  local p, k = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  persisted = persisted or p > 0
  local pending = redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1
  if pending then
    acked, left = acked + 1, left + tonumber(ARGV[i + 1])
  end
  if (not pending or limit > 1) and p > k then
    redo[#redo + 1] = ARGV[i]
  end
  if not pending or limit > 1 then
    for j = t, t + 3 * (k - 1), 3 do
      look[#look + 1] = j
    end
  end
  t = t + 3 * k
end
persisted = persisted or #ARGV >= t
for j = t, #ARGV, 3 do
  look[#look + 1] = j
end
-- Keys loaded before queued existed count entries instead (backlog.lua).
if left > 0 and loaded and redis.call('HEXISTS', KEYS[2], 'queued') == 1 then
  redis.call('HINCRBY', KEYS[2], 'queued', -left)
end
local recorded = 0
-- One HMGET finds the buyers Redis records already (all, but for that
-- case): only the others cost more calls.
if #look > 0 and loaded then
  local users = {}
  for _, j in ipairs(look) do
    users[#users + 1] = ARGV[j]
  end
  local known = redis.call('HMGET', KEYS[3], unpack(users))
  for x, j in ipairs(look) do
    if not known[x] then
      local user, order, q = ARGV[j], ARGV[j + 1], tonumber(ARGV[j + 2])
      if redis.call('HEXISTS', KEYS[4], order) == 0 and redis.call('HSETNX', KEYS[3], user, q .. ':' .. order) == 1 then
        recorded = recorded + 1
        if limit > 1 then
          redis.call('HINCRBY', KEYS[2], 'orders', 1)
        end
        local stock = tonumber(redis.call('HGET', KEYS[2], 'stock'))
        if stock > 0 then
          redis.call('HINCRBY', KEYS[2], 'stock', -math.min(q, stock))
        end
      end
    end
  end
end
if not loaded and persisted then
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
local out = {acked, trimmed, recorded, 0}
if loaded then
  out[4] = limit
end
for _, id in ipairs(redo) do
  out[#out + 1] = id
end
return out
