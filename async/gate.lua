-- gate.lua decides a batch of orders of one voucher, atomically and in
-- order: the sale window by Redis's clock, stock left, one order per user;
-- for each order it accepts it takes one unit of stock, records the buyer
-- and appends the order to the voucher's stream.
--
-- KEYS[1] meta hash (stock, initial, begin, end; times in µs since 1970;
--         given: units given back by reconciliation; loaded: when
--         load.lua wrote it, µs)
-- KEYS[2] buyers hash (user id -> order id)
-- KEYS[3] orders stream
-- ARGV    user id, order id (generated before the call), for each order:
--         ARGV[2i-1], ARGV[2i] for the i-th
--
-- Returns one reply per order, in ARGV's order:
--   {0, stock left, entry id, given, initial, loaded}
--                               accepted (given: units given back so far,
--                               initial: the initial stock, loaded: when
--                               the keys were loaded, 0 if unknown; the
--                               level, stock - initial - given, falls by
--                               one per accepted order: see rewind.go)
--   {1}                         the voucher is not loaded
--   {2, µs until the start}     not started
--   {3}                         ended
--   {4}                         sold out
--   {5, order id}               the user has this order already (from an
--                               earlier call, or earlier in this batch)
--
-- The first write is the HINCRBY of the stock: under maxmemory Redis
-- refuses a script only at its first write, so a refused batch takes
-- nothing (see DESIGN.md, "A full Redis"); a batch that got past it is written whole,
-- even past maxmemory (at most gateMaxBatch orders, replicaMaxBatch in
-- durability replica). (Reading every buyer with one HMGET and
-- writing them with one HSET was measured no cheaper than this loop.)
local n = #ARGV / 2
local function every(reply)
  local out = {}
  for i = 1, n do
    out[i] = reply
  end
  return out
end

local meta = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end', 'given', 'initial', 'loaded')
local stock = tonumber(meta[1])
if not stock then
  return every({1})
end
local t = redis.call('TIME')
-- Microseconds since 1970 stay below 2^53, exact in a Lua number.
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local begin = tonumber(meta[2])
if now < begin then
  return every({2, begin - now})
end
if now >= tonumber(meta[3]) then
  return every({3})
end
local given = tonumber(meta[4]) or 0
local initial = tonumber(meta[5]) or 0
local loaded = tonumber(meta[6]) or 0

local out = {}
for i = 1, n do
  local user, order = ARGV[2 * i - 1], ARGV[2 * i]
  local prev
  if stock > 0 then
    prev = redis.call('HGET', KEYS[2], user)
  end
  if stock <= 0 then
    out[i] = {4}
  elseif prev then
    out[i] = {5, prev}
  else
    redis.call('HINCRBY', KEYS[1], 'stock', -1)
    redis.call('HSET', KEYS[2], user, order)
    stock = stock - 1
    out[i] = {0, stock, redis.call('XADD', KEYS[3], '*', 'o', order, 'u', user), given, initial, loaded}
  end
end
return out
