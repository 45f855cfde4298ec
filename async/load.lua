-- load.lua makes a voucher sellable in Redis, once: when its meta hash is
-- missing it creates the stream's consumer group (from the first entry, so
-- none is missed), counts the orders still in the stream as buyers, and
-- writes the meta hash last, with a stock no larger than the buyers leave,
-- stamped with the time it was loaded. The buyers MySQL holds are written by the
-- caller before the call; the gate refuses every order while meta is
-- missing, so nobody buys from a half-loaded voucher.
--
-- KEYS[1] meta hash, KEYS[2] buyers hash, KEYS[3] orders stream
-- ARGV[1] remaining stock in MySQL, ARGV[2] initial stock,
-- ARGV[3] begin, ARGV[4] end (µs since 1970), ARGV[5] consumer group
--
-- Returns 1 when it loaded the voucher, 0 when it was loaded already.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
-- Errors first: a script's earlier writes are not undone by a later error.
local created = redis.pcall('XGROUP', 'CREATE', KEYS[3], ARGV[5], '0', 'MKSTREAM')
if type(created) == 'table' and created.err and not string.find(created.err, 'BUSYGROUP', 1, true) then
  return created
end
-- Orders accepted but not persisted yet are in the stream, not in MySQL:
-- their buyers hold stock too.
local stock = tonumber(ARGV[1])
for _, e in ipairs(redis.call('XRANGE', KEYS[3], '-', '+')) do
  local f, order, user = e[2], nil, nil
  for i = 1, #f, 2 do
    if f[i] == 'o' then order = f[i + 1] elseif f[i] == 'u' then user = f[i + 1] end
  end
  if order and user and redis.call('HSETNX', KEYS[2], user, order) == 1 then
    stock = stock - 1
  end
end
-- If the buyers hash survived what lost the meta hash, the stream's buyers
-- were in it already and were not counted above; every buyer in it holds a
-- unit, so the stock is at most what they leave. The lower of the two
-- never sells a unit twice (reconciliation reports the difference).
local left = tonumber(ARGV[2]) - redis.call('HLEN', KEYS[2])
if left < stock then
  stock = left
end
if stock < 0 then
  stock = 0
end
-- loaded tells this history of the keys from the next one's (rewind.go).
local t = redis.call('TIME')
-- A string: Redis would write a large Lua number in exponent notation.
local loaded = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
redis.call('HSET', KEYS[1], 'stock', stock, 'initial', ARGV[2], 'begin', ARGV[3], 'end', ARGV[4], 'loaded', loaded)
return 1
