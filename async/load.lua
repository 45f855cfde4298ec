-- load.lua (after entry.lua) makes a voucher sellable in Redis, once: when its meta hash is
-- missing it creates the stream's consumer group (from the first entry, so
-- none is missed), takes in the snapshot of MySQL the caller staged (the
-- buyers of live orders, the closed orders whose returns are pending, the
-- orders placed with an idempotency key), counts the orders still in the
-- stream that MySQL does not hold as their buyers' units (and their keys
-- as placed), and writes the meta hash last, with a stock no larger than
-- the buyers leave, stamped with the time it was loaded. The gate refuses
-- every order while meta is missing, so nobody buys from a half-loaded
-- voucher.
--
-- The snapshot is refused, and its staged hashes dropped, when the voucher
-- is loaded already (another reload won: its buyers may have bought
-- since) or when the fence moved since the caller read it before its
-- snapshot (a return ran meanwhile, which the snapshot may not show): the
-- caller reads MySQL again.
--
-- KEYS[1] meta hash, KEYS[2] buyers hash, KEYS[3] orders stream,
-- KEYS[4] keyed hash, KEYS[5] returned hash, KEYS[6] fence,
-- KEYS[7..9] the staged buyers, returned and keyed hashes
-- ARGV[1] remaining stock in MySQL, ARGV[2] initial stock,
-- ARGV[3] begin, ARGV[4] end (µs since 1970), ARGV[5] consumer group,
-- ARGV[6] limit per buyer, ARGV[7] payment window (µs, 0 for none),
-- ARGV[8] MySQL's live orders on these keys, ARGV[9] the fence read
-- before the snapshot ("" for none), ARGV[10..] ids of orders in the
-- stream that MySQL's snapshot holds
--
-- Returns 1 when it loaded the voucher, 0 when it was loaded already, -1
-- when the fence moved.
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[7], KEYS[8], KEYS[9])
  return 0
end
if (redis.call('GET', KEYS[6]) or '') ~= ARGV[9] then
  redis.call('DEL', KEYS[7], KEYS[8], KEYS[9])
  return -1
end
-- Errors first: a script's earlier writes are not undone by a later error.
local created = redis.pcall('XGROUP', 'CREATE', KEYS[3], ARGV[5], '0', 'MKSTREAM')
if type(created) == 'table' and created.err and not string.find(created.err, 'BUSYGROUP', 1, true) then
  return created
end

-- MySQL's records are written over what survived of the hashes.
for _, p in ipairs({{7, 2}, {8, 5}, {9, 4}}) do
  local kv = redis.call('HGETALL', KEYS[p[1]])
  for j = 1, #kv, 2 do
    redis.call('HSET', KEYS[p[2]], kv[j], kv[j + 1])
  end
end
redis.call('DEL', KEYS[7], KEYS[8], KEYS[9])

-- parse reads a buyer's record: units and the latest order.
local function parse(v)
  local c = string.find(v, ':', 1, true)
  if not c then
    return 1, v
  end
  return tonumber(string.sub(v, 1, c - 1)), string.sub(v, c + 1)
end

-- older reports whether order id a is below b: decimal strings, compared
-- as such (Lua's numbers are doubles, exact only to 2^53).
local function older(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

local persisted = {}
for i = 10, #ARGV do
  persisted[ARGV[i]] = true
end
local orders = tonumber(ARGV[8])
-- Orders accepted but not persisted yet are in the stream, not in MySQL:
-- their buyers hold stock too.
local stock = tonumber(ARGV[1])
-- take counts an order of the stream: its key as placed, and, unless
-- MySQL holds it, its units as its buyer's.
local function take(entry, order, user, q, key)
  if order and user and key then
    redis.call('HSET', KEYS[4], user .. ':' .. key, order .. ':' .. entry)
  end
  if order and user and not persisted[order] then
    local units, latest = 0, nil
    local prev = redis.call('HGET', KEYS[2], user)
    if prev then
      units, latest = parse(prev)
    end
    -- A record that names this order or a later one counts it already: it
    -- survived what lost the meta hash (MySQL's buyers are written over
    -- it, and the consumers persist a stream in order).
    if not latest or older(latest, order) then
      redis.call('HSET', KEYS[2], user, (units + q) .. ':' .. order)
      stock = stock - q
      orders = orders + 1
    end
  end
end

-- The orders of the entries the group has not acknowledged are the
-- backlog the gate and ack.lua count on from here (meta's queued).
local queued = 0
for _, e in ipairs(unacked_entries(KEYS[3], ARGV[5])) do
  queued = queued + #entry_orders(e[2])
end
for _, e in ipairs(redis.call('XRANGE', KEYS[3], '-', '+')) do
  for _, o in ipairs(entry_orders(e[2])) do
    take(e[1], o.order, o.user, o.q, o.key)
  end
end
-- Every unit the buyers hold is not in stock: the stock is at most what
-- they leave. The lower of the two never sells a unit twice
-- (reconciliation reports the difference).
local held = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  held = held + parse(v)
end
local left = tonumber(ARGV[2]) - held
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
-- The keyed and returned hashes exist from the start, with a field no
-- order takes: on Redis Cluster a script whose keys are partly missing
-- while its slot migrates gets TRYAGAIN, and the gate's script takes the
-- keyed hash whether a request has a key or not.
redis.call('HSETNX', KEYS[4], '-', '')
redis.call('HSETNX', KEYS[5], '-', '0')
redis.call('HSET', KEYS[1], 'stock', stock, 'initial', ARGV[2], 'begin', ARGV[3], 'end', ARGV[4], 'loaded', loaded,
  'limit', ARGV[6], 'window', ARGV[7], 'orders', orders, 'queued', queued)
return 1
