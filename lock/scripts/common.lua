-- Shared code of the acquire, check, cancel and release scripts: the Go side
-- puts it in place of their "-- #include common.lua" line. Fast paths come
-- before that line so that they do not pay for defining these functions.
--
-- KEYS[1] lock   P{N}    hash: <token> = hold count, "fence" = the holder's fence
-- KEYS[2] queue  P{N}:q  zset: "<token>/<lease ms>" scored by arrival (Redis TIME, µs)
-- KEYS[3] fence  P{N}:f  string: the last fence issued for N
--
-- ARGV[1] token of the caller ("<client id>:<random>")
-- ARGV[2] lease the caller asks for, ms
-- ARGV[3] the client's settings, read only off the fast paths:
--         "<handoff lease ms>:<fence retention ms>:<queue TTL ms>:<channel prefix>"
--         handoff lease: the longest lease a pushed grant carries;
--         queue TTL: how long a queue outlives its last enqueue or check;
--         a waiter's client listens on <channel prefix><client id>
-- ARGV[4] acquire: "1" to queue the caller if it cannot have the lock now
-- ARGV[5], ARGV[6], ARGV[7] release, optional: token and lease of the
--         caller's client's next local waiter, and "1" if it may have the
--         lock next
local lockKey, queueKey, fenceKey = KEYS[1], KEYS[2], KEYS[3]
local token = ARGV[1]

local handoffLease, retention, queueTTL, channelPrefix
local function settings()
  if not handoffLease then
    handoffLease, retention, queueTTL, channelPrefix = string.match(ARGV[3], '^(%d+):(%d+):(%d+):(.*)$')
    handoffLease = tonumber(handoffLease)
  end
end

-- nextFence issues the next fencing token. INCR makes it last + 1; when the
-- fence key is missing (never used, or forgotten after the retention) it is
-- reseeded from Redis TIME in µs, which is above anything issued before as
-- long as fewer than one lock per µs was taken since the last seeding.
-- Tokens stay below 2^53, so Lua's doubles hold them exactly, and Redis
-- passes such numbers on as exact integers.
local function nextFence()
  local f = redis.call('INCR', fenceKey)
  if f == 1 then
    settings()
    local t = redis.call('TIME')
    f = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', fenceKey, f, 'PX', retention)
  end
  return f
end

-- grant makes owner the holder (hold count 1) for px ms; returns its fence.
local function grant(owner, px)
  local f = nextFence()
  redis.call('HSET', lockKey, owner, 1, 'fence', f)
  redis.call('PEXPIRE', lockKey, px)
  return f
end

-- handoff gives the free lock to the oldest waiter and publishes the grant
-- to that waiter's client, unless it is the caller. It returns the new
-- holder (nil if nobody waits), its fence and its lease.
local function handoff()
  local head = redis.call('ZPOPMIN', queueKey)
  if #head == 0 then return nil end
  local w, px = string.match(head[1], '^(.*)/(%d+)$')
  px = tonumber(px)
  if w == token then return w, grant(w, px), px end
  settings()
  px = math.min(px, handoffLease)
  local f = grant(w, px)
  redis.call('PUBLISH', channelPrefix .. string.match(w, '^[^:]*'),
    w .. ' ' .. string.format('%.0f', f) .. ' ' .. px)
  return w, f, px
end

-- enqueue puts waiter w (asking for lease l ms) at the tail of the queue,
-- or leaves it in its place if it is queued already.
local function enqueue(w, l)
  settings()
  local t = redis.call('TIME')
  redis.call('ZADD', queueKey, 'NX', tonumber(t[1]) * 1000000 + tonumber(t[2]), w .. '/' .. l)
  redis.call('PEXPIRE', queueKey, queueTTL)
end

-- held returns the caller's grant if it holds the lock.
local function held()
  if redis.call('HEXISTS', lockKey, token) == 1 then
    return {1, tonumber(redis.call('HGET', lockKey, 'fence')), redis.call('PTTL', lockKey)}
  end
  return nil
end
