-- gate.lua decides a batch of orders of one voucher, atomically and in
-- order: the sale window by Redis's clock, the quantity, stock left (all
-- or nothing), the buyer's limit; for each order it accepts it takes its
-- units from the stock and adds them to the buyer's record; the orders it
-- accepted go to the voucher's stream as one entry (layout.ParseEntry),
-- and their pointers to their buckets.
--
-- KEYS[1] meta hash (stock, initial, begin, end; times in µs since 1970;
--         given: units given back by reconciliation; returned: units of
--         closed orders put back; loaded: when load.lua wrote it, µs;
--         limit: units per buyer, absent 1; window: payment window, µs,
--         absent 0; orders: with a limit above 1, the live orders — with
--         a limit of 1 they are the buyers; queued: orders appended to
--         the stream and not acknowledged, layout.StreamBacklog)
-- KEYS[2] buyers hash (user id -> "<units>:<latest order id>"; a value
--         without ":" is the older form, one unit)
-- KEYS[3] orders stream
-- KEYS[4] keyed hash ("<user>:<idempotency key>" -> order id)
-- KEYS[5..] the order pointers' buckets (layout.Pointer: order id ->
--         "<voucher>:<user>:<entry id>"), in this slot: an order id
--         carries the slot of the shard it was taken on
-- ARGV[1] voucher id, ARGV[2] the buckets' TTL, ms, ARGV[3] the stride:
--         5 or 2 arguments per order; then for each order: user id, order
--         id (generated before the call), and with a stride of 5 its
--         quantity, idempotency key ("" for none) and the index in KEYS of
--         its pointer's bucket. A stride of 2 is a batch of orders of one
--         unit, without a key, whose pointers are all in KEYS[5] (nearly
--         every batch): each argument costs Redis about 0.1 µs.
--
-- Returns one flat array (gatereply.go reads it):
--   {1}                          the voucher is not loaded
--   {2, µs until the start}      not started
--   {3}                          ended
-- or, when the sale is open, a head and one reply per order, in ARGV's
-- order:
--   {0, stock, given, initial, loaded, returned, pay_by, window, entry,
--    r1 .. rn}
-- stock: the stock before the batch (an accepted order's stock left
-- follows from the quantities accepted before it); given, returned: units
-- given back and put back so far; initial: the initial stock; loaded:
-- when the keys were loaded, 0 if unknown (the level, stock - initial -
-- given - returned, falls by the quantity per accepted order: see
-- rewind.go); pay_by: µs, 0 without a window; window: the payment
-- window, µs; entry: the id of the stream entry of the accepted orders
-- ("" when none was). Each ri is:
--   0                            accepted
--   4                            sold out: fewer units left than asked
--   {5, order id}                limit 1: the user has this order already
--                                (from an earlier call, or earlier in
--                                this batch)
--   {6, units}                   the user's live orders hold units, and
--                                this order would pass the limit
--   {7, order id, entry id}      an order was placed with this key already
--   {8, limit}                   the quantity is above the limit
-- The constants come once per batch, and an accepted order is one small
-- integer: turning a reply into RESP costs Redis about 0.2 µs per value
-- (issue 34).
--
-- Under maxmemory Redis refuses a script only at its first write (or
-- HSETNX, even one that writes nothing), so a refused batch takes nothing
-- (see DESIGN.md, "A full Redis"); a batch that got past it is written
-- whole, even past maxmemory (at most gateMaxBatch orders,
-- replicaMaxBatch in durability replica). Each redis.call costs about a
-- µs of its own, so an accepted order makes one with a limit of 1
-- (HSETNX of the buyer), and the entry, the stock, the counts and the
-- pointers are written once per batch (issue 34). (Reading every buyer
-- with one HMGET and writing them with one HSET was measured no cheaper
-- than this loop.)
local stride = tonumber(ARGV[3])
local n = (#ARGV - 3) / stride
local meta = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end', 'given', 'initial', 'loaded', 'limit', 'window', 'returned', 'queued')
local stock = tonumber(meta[1])
if not stock then
  return {1}
end
local t = redis.call('TIME')
-- Microseconds since 1970 stay below 2^53, exact in a Lua number.
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local begin = tonumber(meta[2])
if now < begin then
  return {2, begin - now}
end
if now >= tonumber(meta[3]) then
  return {3}
end
local given = tonumber(meta[4]) or 0
local initial = tonumber(meta[5]) or 0
local loaded = tonumber(meta[6]) or 0
local limit = tonumber(meta[7]) or 1
local window = tonumber(meta[8]) or 0
local returned = tonumber(meta[9]) or 0
local payBy = 0
if window > 0 then
  payBy = now + window
end

-- taken and opened are the units and orders the batch took: the meta
-- hash's stock and orders are written once, after the loop.
local taken, opened = 0, 0

-- units and latest are what the buyer's record held, read by record.
local units, latest

-- record adds q units and the order to the buyer's record, unless that
-- would pass the limit (then false: units and latest say why). With a
-- limit of 1 a new buyer costs one HSETNX; the record of a buyer whose
-- units came back ("0:<order>") is read and written as with a limit.
local function record(user, order, q)
  -- A value without ":" is one unit: no string to build per order.
  if limit == 1 and redis.call('HSETNX', KEYS[2], user, order) == 1 then
    return true
  end
  units, latest = 0, nil
  local prev = redis.call('HGET', KEYS[2], user)
  if prev then
    -- A value without ":" (written before issue 31) reads as one unit.
    local u, o = string.match(prev, '^(%d+):(.*)$')
    units, latest = tonumber(u) or 1, o or prev
  end
  if units + q > limit then
    return false
  end
  redis.call('HSET', KEYS[2], user, (units + q) .. ':' .. order)
  if limit > 1 then
    opened = opened + 1
  end
  return true
end

-- fields is the batch's stream entry: order id -> its buyer (see
-- layout.ParseEntry); one XADD after the loop (issue 34: an entry per
-- order cost 2.7 µs of Redis, and its read and ack 3 more). accepted
-- lists the indexes in ARGV's order of the orders it holds, and keyed
-- "<user>:<key>" -> the index of the order placed with it in this batch.
local fields, accepted, keyed = {}, {}, {}
-- dupes are the replies to orders whose key an order of this batch took.
local dupes = {}

-- decide returns the reply to the i-th order, recording it if accepted.
local function decide(i, user, order, q, key)
  if q > limit then
    return {8, limit}
  end
  if key ~= '' then
    local k = user .. ':' .. key
    if keyed[k] then
      local r = {7, ARGV[3 + stride * (keyed[k] - 1) + 2], false} -- its entry: after the XADD
      dupes[#dupes + 1] = r
      return r
    end
    local placed = redis.call('HGET', KEYS[4], k)
    if placed then
      local o, e = string.match(placed, '^([^:]*):?(.*)$')
      return {7, o, e}
    end
  end
  if stock < q then
    return 4
  end
  if not record(user, order, q) then
    if limit == 1 then
      return {5, latest}
    end
    return {6, units}
  end
  stock, taken = stock - q, taken + q
  local v = user
  if q ~= 1 or payBy > 0 or key ~= '' then
    v = user .. ' ' .. q .. ' ' .. string.format('%d', payBy) .. ' ' .. key
    if key ~= '' then
      keyed[user .. ':' .. key] = i
    end
  end
  fields[#fields + 1], fields[#fields + 2] = order, v
  accepted[#accepted + 1] = i
  return 0
end

local out = {0, stock, given, initial, loaded, returned, payBy, window, ''}
for i = 1, n do
  local a = 3 + stride * (i - 1) + 1
  if stride == 2 then
    out[9 + i] = decide(i, ARGV[a], ARGV[a + 1], 1, '')
  else
    out[9 + i] = decide(i, ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 3])
  end
end
if #accepted == 0 then
  return out
end
local entry = redis.call('XADD', KEYS[3], '*', unpack(fields))
-- pointers holds, per bucket (KEYS index), the field-value pairs of the
-- accepted orders' pointers: one HSET per bucket.
local pointers = {}
local vprefix = ARGV[1] .. ':'
out[9] = entry
for _, i in ipairs(accepted) do
  local a = 3 + stride * (i - 1) + 1
  local user, order, key, bucket = ARGV[a], ARGV[a + 1], '', 5
  if stride == 5 then
    key, bucket = ARGV[a + 3], tonumber(ARGV[a + 4])
  end
  local p = pointers[bucket]
  if not p then
    p = {}
    pointers[bucket] = p
  end
  p[#p + 1], p[#p + 2] = order, vprefix .. user .. ':' .. entry
  if key ~= '' then
    redis.call('HSET', KEYS[4], user .. ':' .. key, order .. ':' .. entry)
  end
end
for _, r in ipairs(dupes) do
  r[3] = entry
end
redis.call('HINCRBY', KEYS[1], 'stock', -taken)
if meta[10] then -- keys an older version loaded count entries (backlog.lua)
  redis.call('HINCRBY', KEYS[1], 'queued', #accepted)
end
if opened > 0 then
  redis.call('HINCRBY', KEYS[1], 'orders', opened)
end
for bucket, p in pairs(pointers) do
  redis.call('HSET', KEYS[bucket], unpack(p))
  redis.call('PEXPIRE', KEYS[bucket], ARGV[2])
end
return out
