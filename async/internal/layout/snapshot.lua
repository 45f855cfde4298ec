-- snapshot.lua reads a voucher's live figures in one step: stock left,
-- initial stock, the units its buyers hold and their live orders. With
-- nothing sold twice and no buyer lost, stock + held = initial at every
-- instant.
--
-- KEYS[1] meta hash, KEYS[2] buyers hash
-- ARGV[1] "count": with a limit above 1, sum the units of every buyer
--         (O(buyers): audits only); otherwise held is -1 there, and the
--         read is O(1) whatever the buyers and the backlog (the periodic
--         readers and GET of a voucher: issue 34)
--
-- Returns {stock, initial, held, orders}, or {} when the voucher is not
-- loaded.
local m = redis.call('HMGET', KEYS[1], 'stock', 'initial', 'limit', 'orders')
if not m[1] then
  return {}
end
-- With a limit of 1 every buyer holds one order of one unit: HLEN is both
-- sums, without reading every buyer.
if (tonumber(m[3]) or 1) == 1 then
  local buyers = redis.call('HLEN', KEYS[2])
  return {tonumber(m[1]), tonumber(m[2]), buyers, buyers}
end
if ARGV[1] ~= 'count' then
  return {tonumber(m[1]), tonumber(m[2]), -1, tonumber(m[4]) or 0}
end
local held = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  local c = string.find(v, ':', 1, true)
  if c then
    held = held + tonumber(string.sub(v, 1, c - 1))
  else
    held = held + 1
  end
end
return {tonumber(m[1]), tonumber(m[2]), held, tonumber(m[4]) or 0}
