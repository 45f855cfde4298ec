-- Shared code of the RWMutex and Semaphore scripts (shared_*.lua): the Go
-- side puts it in place of their "-- #include shared_common.lua" line.
--
-- A name's holders share its permits: a shared hold (a reader, a semaphore
-- permit) takes one, an exclusive hold (a writer) takes them all. Waiters
-- are served strictly in arrival order: a head that cannot be served stops
-- everyone behind it, so a waiting writer is not overtaken by readers.
--
-- KEYS[1] holders  zset: holder token -> lease deadline (Redis TIME, ms)
-- KEYS[2] owner    string: the exclusive holder's token; expires with its lease
-- KEYS[3] queue    zset: "<token>/<lease ms>/<kind>" scored by arrival (µs)
-- KEYS[4] alive    zset: queue member -> deadline (ms): a waiter that has
--                  not checked in by then is dropped (its process died)
-- KEYS[5] fence    string: the last fence issued to an exclusive holder
-- KEYS[6] permits  string: how many shared holds fit; missing = no limit
--
-- ARGV[1] token of the caller ("<client id>:<random>")
-- ARGV[2] "<handoff lease ms>:<fence retention ms>:<queue TTL ms>:<channel prefix>"
-- ARGV[3] lease the caller asks for, ms
-- ARGV[4] kind: "s" shared, "x" exclusive
-- ARGV[5] "1" to queue the caller if it is not granted now
-- ARGV[6] permits: the value KEYS[6] starts from if missing ("0": none);
--         shared_permits.lua sets it
--
-- A grant replies {fence, lease ms, 1}: an exclusive holder's own fence, a
-- shared holder the last fence issued (0 if none). A grant to another
-- waiter is pushed as "<token> <fence> <lease ms> 1" on
-- <channel prefix><client id>, the format of Mutex's grants.
local holders, owner, queue, alive, fenceKey, permitsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token = ARGV[1]
local handoffLease, retention, queueTTL, channelPrefix = string.match(ARGV[2], '^(%d+):(%d+):(%d+):(.*)$')
handoffLease, queueTTL = tonumber(handoffLease), tonumber(queueTTL)
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local function lastFence()
  return tonumber(redis.call('GET', fenceKey)) or 0
end

-- reserve issues the next fencing token. When the fence key is missing
-- (never used, or forgotten after the retention) it restarts from Redis
-- TIME in µs, above anything issued before (see reserve in common.lua).
local function reserve()
  local f = redis.call('INCR', fenceKey)
  if f <= 1 then
    f = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
    redis.call('SET', fenceKey, string.format('%d', f), 'PX', retention)
  end
  return f
end

-- purge drops holders whose lease ended and waiters that stopped checking in.
local function purge()
  if redis.call('ZREMRANGEBYSCORE', holders, '-inf', now) > 0 then
    local x = redis.call('GET', owner)
    if x and not redis.call('ZSCORE', holders, x) then redis.call('DEL', owner) end
  end
  local dead = redis.call('ZRANGEBYSCORE', alive, '-inf', now, 'LIMIT', 0, 256)
  if #dead > 0 then
    redis.call('ZREM', queue, unpack(dead))
    redis.call('ZREM', alive, unpack(dead))
  end
end

-- free reports whether a hold of kind fits now.
local function free(kind)
  local n = redis.call('ZCARD', holders)
  if kind == 'x' then return n == 0 end
  if redis.call('EXISTS', owner) == 1 then return false end
  local cap = redis.call('GET', permitsKey)
  if not cap and ARGV[6] ~= '0' then
    redis.call('SET', permitsKey, ARGV[6])
    cap = ARGV[6]
  end
  return not cap or n < tonumber(cap)
end

-- keepUntil makes the holders key live at least until deadline (ms), the
-- end of its longest lease.
local function keepUntil(deadline)
  local ttl = redis.call('PTTL', holders)
  if ttl < 0 or now + ttl < deadline then redis.call('PEXPIREAT', holders, deadline) end
end

-- grant makes w a holder of kind for px ms and returns its fence.
local function grant(w, px, kind)
  local deadline = now + px
  redis.call('ZADD', holders, deadline, w)
  keepUntil(deadline)
  if kind == 'x' then
    redis.call('SET', owner, w, 'PXAT', deadline)
    return reserve()
  end
  return lastFence()
end

-- serve grants waiters from the head of the queue while their holds fit,
-- pushing each grant to its waiter's client; it returns the caller's
-- grant if the caller was among them.
local function serve()
  local mine
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)
    if #head == 0 then break end
    local w, px, kind = string.match(head[1], '^(.*)/(%d+)/([sx])$')
    if not free(kind) then break end
    redis.call('ZREM', queue, head[1])
    redis.call('ZREM', alive, head[1])
    px = tonumber(px)
    if w == token then
      mine = {grant(w, px, kind), px, 1}
    else
      px = math.min(px, handoffLease)
      local f = grant(w, px, kind)
      redis.call('PUBLISH', channelPrefix .. string.match(w, '^[^:]*'),
        w .. ' ' .. string.format('%d', f) .. ' ' .. px .. ' 1')
    end
  end
  return mine
end

-- held returns the caller's grant if it holds.
local function held()
  local s = redis.call('ZSCORE', holders, token)
  if s then return {lastFence(), tonumber(s) - now, 1} end
  return nil
end
