-- lookup.lua returns an accepted order that is not in MySQL from its
-- stream entry, while it is still on its way: the entry is in the stream
-- and the order was not dead-lettered.
--
-- KEYS[1] orders stream, KEYS[2] failed hash
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] the order's entry id
--
-- Returns the fields and values (a flat array) of the entry when it holds
-- the order alone, or of the order's one field when it holds a gate batch
-- (layout.ParseEntry reads both), when the order is pending; an empty
-- array when it failed or is gone.
local e = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])
if #e == 0 or redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  return {}
end
local f = e[1][2]
for i = 1, #f, 2 do
  if f[i] == 'o' then
    return f
  elseif f[i] == ARGV[2] then
    return {f[i], f[i + 1]}
  end
end
return {}
