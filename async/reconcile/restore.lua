-- restore.lua gives back the unit of stock an order took that will never be
-- persisted: it removes the buyer and adds one to the stock, if the user is
-- still recorded with that order and the stock is below the initial one.
-- It counts the units given back in the meta hash's field given, so that
-- stock - given only ever falls while Redis keeps its writes (async/rewind.go).
--
-- KEYS[1] meta hash, KEYS[2] buyers hash
-- ARGV[1] user id, ARGV[2] order id
--
-- Returns 1 when it restored the unit, 0 when the buyer changed or the
-- voucher is not loaded, -1 when the stock is full already.
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 0
end
local m = redis.call('HMGET', KEYS[1], 'stock', 'initial')
if not m[1] then
  return 0
end
if tonumber(m[1]) >= tonumber(m[2]) then
  return -1
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'stock', 1)
redis.call('HINCRBY', KEYS[1], 'given', 1)
return 1
