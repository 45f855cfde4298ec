-- gate.lua decides one order of one voucher, atomically: the sale window by
-- Redis's clock, stock left, one order per user; then it takes one unit of
-- stock, records the buyer and appends the order to the voucher's stream.
--
-- KEYS[1] meta hash (stock, initial, begin, end; times in µs since 1970;
--         given: units given back by reconciliation)
-- KEYS[2] buyers hash (user id -> order id)
-- KEYS[3] orders stream
-- ARGV[1] user id, ARGV[2] order id (generated before the call)
--
-- Returns {code, value}:
--   {0, stock left, entry id, given}   accepted (given: units given back
--                               so far; see rewind.go)
--   {1}                         the voucher is not loaded
--   {2, µs until the start}     not started
--   {3}                         ended
--   {4}                         sold out
--   {5, order id}               the user has this order already
local meta = redis.call('HMGET', KEYS[1], 'stock', 'begin', 'end', 'given')
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
if stock <= 0 then
  return {4}
end
local prev = redis.call('HGET', KEYS[2], ARGV[1])
if prev then
  return {5, prev}
end
redis.call('HINCRBY', KEYS[1], 'stock', -1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local id = redis.call('XADD', KEYS[3], '*', 'o', ARGV[2], 'u', ARGV[1])
return {0, stock - 1, id, tonumber(meta[4]) or 0}
