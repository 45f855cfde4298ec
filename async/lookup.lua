-- lookup.lua returns an accepted order that is not in MySQL from its
-- stream entry, while it is still on its way: the entry is in the stream
-- and the order was not dead-lettered.
--
-- KEYS[1] orders stream, KEYS[2] failed hash
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] the order's entry id
--
-- Returns the entry's fields and values (a flat array) when the order is
-- pending, an empty array when it failed or is gone.
local e = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])
if #e == 0 or redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  return {}
end
return e[1][2]
