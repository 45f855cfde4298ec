-- return.lua puts the units of closed (cancelled or expired) orders back
-- into a voucher's stock, on the shard that holds their buyers, once per
-- order: an order already in the returned hash changes nothing, so the
-- sweep of pending returns may run it again after a crash.
--
-- KEYS[1] meta hash, KEYS[2] buyers hash, KEYS[3] returned hash,
-- KEYS[4] fence
-- ARGV    order id, user id, quantity for each order: ARGV[3i-2..3i]
--
-- Returns the units put back, or -1 when the voucher is not loaded: MySQL's
-- remaining stock, which a load starts from, counts them already. A load
-- on its way may hold a snapshot taken before these orders closed, in
-- which they still hold their units: the fence changes, and load.lua
-- refuses to write that snapshot (the reload reads MySQL again). Its
-- values never repeat: Redis's clock in µs, then + 1 per change.
if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('EXISTS', KEYS[4]) == 1 then
    redis.call('INCR', KEYS[4])
  else
    local t = redis.call('TIME')
    redis.call('SET', KEYS[4], t[1] .. string.rep('0', 6 - #t[2]) .. t[2])
  end
  redis.call('PEXPIRE', KEYS[4], 600000)
  return -1
end
local several = (tonumber(redis.call('HGET', KEYS[1], 'limit')) or 1) > 1
local back = 0
for i = 1, #ARGV, 3 do
  local order, user, q = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if redis.call('HSETNX', KEYS[3], order, q) == 1 then
    redis.call('HINCRBY', KEYS[1], 'stock', q)
    redis.call('HINCRBY', KEYS[1], 'returned', q)
    if several then
      redis.call('HINCRBY', KEYS[1], 'orders', -1)
    end
    local prev = redis.call('HGET', KEYS[2], user)
    if prev then
      local units, latest = 1, prev
      local c = string.find(prev, ':', 1, true)
      if c then
        units, latest = tonumber(string.sub(prev, 1, c - 1)), string.sub(prev, c + 1)
      end
      if units <= q then
        redis.call('HDEL', KEYS[2], user)
      else
        redis.call('HSET', KEYS[2], user, (units - q) .. ':' .. latest)
      end
    end
    back = back + q
  end
end
return back
