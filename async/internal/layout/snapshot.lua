-- snapshot.lua reads a voucher's live figures in one step: stock left,
-- initial stock and the number of buyers. With nothing sold twice and no
-- buyer lost, stock + buyers = initial at every instant.
--
-- KEYS[1] meta hash, KEYS[2] buyers hash
--
-- Returns {stock, initial, buyers}, or {} when the voucher is not loaded.
local m = redis.call('HMGET', KEYS[1], 'stock', 'initial')
if not m[1] then
  return {}
end
return {tonumber(m[1]), tonumber(m[2]), redis.call('HLEN', KEYS[2])}
