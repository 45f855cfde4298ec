-- restore.lua gives back the units an order took that will never be
-- persisted: it takes them from the buyer's record (removing the buyer at
-- none) and adds them to the stock, if the user's latest order is still
-- that one and the stock is below the initial one. It counts the units
-- given back in the meta hash's field given, so that stock - given only
-- ever falls while Redis keeps its writes (async/rewind.go).
--
-- KEYS[1] meta hash, KEYS[2] buyers hash
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] its units (default 1)
--
-- Returns 1 when it restored the units, 0 when the buyer changed or the
-- voucher is not loaded, -1 when the stock is full already.
local prev = redis.call('HGET', KEYS[2], ARGV[1])
if not prev then
  return 0
end
local units, latest = 1, prev
local c = string.find(prev, ':', 1, true)
if c then
  units, latest = tonumber(string.sub(prev, 1, c - 1)), string.sub(prev, c + 1)
end
if latest ~= ARGV[2] then
  return 0
end
local m = redis.call('HMGET', KEYS[1], 'stock', 'initial')
if not m[1] then
  return 0
end
local q = tonumber(ARGV[3]) or 1
if tonumber(m[1]) + q > tonumber(m[2]) then
  return -1
end
if units <= q then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], (units - q) .. ':' .. latest)
end
redis.call('HINCRBY', KEYS[1], 'stock', q)
redis.call('HINCRBY', KEYS[1], 'given', q)
if (tonumber(redis.call('HGET', KEYS[1], 'limit')) or 1) > 1 then
  redis.call('HINCRBY', KEYS[1], 'orders', -1)
end
return 1
