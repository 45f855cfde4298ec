-- repoint.lua records another value for a buyer, if the buyer is still
-- recorded with the expected units and latest order.
--
-- KEYS[1] buyers hash
-- ARGV[1] user id, ARGV[2] expected record, ARGV[3] new record (records
-- are "<units>:<order id>"; a stored value without ":" is one unit)
--
-- Returns 1 when it changed the buyer, 0 otherwise.
local prev = redis.call('HGET', KEYS[1], ARGV[1])
if not prev then
  return 0
end
if not string.find(prev, ':', 1, true) then
  prev = '1:' .. prev
end
if prev ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
