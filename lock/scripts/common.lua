-- Shared code of the acquire, check, cancel and release scripts: the Go side
-- puts it in place of their "-- #include common.lua" line. Fast paths come
-- before that line so that they do not pay for defining these functions.
--
-- KEYS[1] lock   P{N}    hash: <turn token> = hold count, "fence" = the first
--                        fence of the block the turn's grant reserved
-- KEYS[2] queue  P{N}:q  zset: "<token>/<lease ms>/<block>" scored by
--                        arrival (Redis TIME, µs); block is how many fences
--                        the waiter's turn reserves when it is granted
-- KEYS[3] fence  P{N}:f  string: the last fence issued for N
--
-- ARGV[1] token of the caller ("<client id>:<random>")
-- ARGV[2] the client's settings, read only off the fast paths:
--         "<handoff lease ms>:<fence retention ms>:<queue TTL ms>:<channel prefix>"
--         handoff lease: the longest lease a pushed grant carries;
--         queue TTL: how long a queue outlives its last enqueue or check;
--         a waiter's client listens on <channel prefix><client id>
-- acquire, check and cancel:
-- ARGV[3] lease the caller asks for, ms
-- ARGV[4] the caller's block: fences its turn reserves if it is granted
-- ARGV[5] acquire: "1" to queue the caller if it cannot have the lock now
-- release, optional: the caller's client's next local waiter:
-- ARGV[3], ARGV[4], ARGV[5] its token, lease and block
-- ARGV[6] "1" if it may have the lock next
--
-- A grant to the caller on its own terms (its lease and block) replies the
-- first fence of the block, a bare integer; other grants reply {first
-- fence, lease ms, block}. A push carries
-- "<token> <first fence> <lease ms> <block>".
local lockKey, queueKey, fenceKey = KEYS[1], KEYS[2], KEYS[3]
local token = ARGV[1]

local handoffLease, retention, queueTTL, channelPrefix
local function settings()
  if not handoffLease then
    handoffLease, retention, queueTTL, channelPrefix = string.match(ARGV[2], '^(%d+):(%d+):(%d+):(.*)$')
    handoffLease = tonumber(handoffLease)
  end
end

-- Fences go into commands as string.format('%d', f): a Lua number would be
-- formatted by Redis with "%.17g", exact too but several times slower.

-- reserve issues a block of n fencing tokens and returns the first. INCRBY
-- makes the last one last + n; when the fence key is missing (never used,
-- or forgotten after the retention), INCRBY answers n, at most 1024, and
-- the key is restarted from Redis TIME in µs,
-- which is above anything issued before as long as fewer than one token
-- per µs was issued since the last restart. Tokens stay below 2^53, so
-- Lua's doubles hold them exactly, and Redis passes such numbers on as
-- exact integers.
local function reserve(n)
  local last = redis.call('INCRBY', fenceKey, n)
  if last <= 1024 then
    settings()
    local t = redis.call('TIME')
    last = tonumber(t[1]) * 1000000 + tonumber(t[2]) + n - 1
    redis.call('SET', fenceKey, string.format('%d', last), 'PX', retention)
  end
  return last - n + 1
end

-- grant makes owner the holder (hold count 1) for px ms with a block of n
-- fences; returns the first.
local function grant(owner, px, n)
  local f = reserve(n)
  redis.call('HSET', lockKey, owner, 1, 'fence', string.format('%d', f))
  redis.call('PEXPIRE', lockKey, string.format('%d', px))
  return f
end

-- handoff gives the free lock to the oldest waiter and publishes the grant
-- to that waiter's client, unless it is the caller. It returns the new
-- holder (nil if nobody waits), its first fence, its lease and its block.
local function handoff()
  local head = redis.call('ZPOPMIN', queueKey)
  if #head == 0 then return nil end
  local w, px, n = string.match(head[1], '^(.*)/(%d+)/(%d+)$')
  px, n = tonumber(px), tonumber(n)
  if w == token then return w, grant(w, px, n), px, n end
  settings()
  px = math.min(px, handoffLease)
  local f = grant(w, px, n)
  redis.call('PUBLISH', channelPrefix .. string.match(w, '^[^:]*'),
    w .. ' ' .. string.format('%d', f) .. ' ' .. px .. ' ' .. n)
  return w, f, px, n
end

-- enqueue puts waiter w (asking for lease l ms and a block of n) at the
-- tail of the queue, or leaves it in its place if it is queued already.
local function enqueue(w, l, n)
  settings()
  local t = redis.call('TIME')
  redis.call('ZADD', queueKey, 'NX', t[1] .. string.format('%06d', t[2]), w .. '/' .. l .. '/' .. n)
  redis.call('PEXPIRE', queueKey, queueTTL)
end

-- held returns the caller's grant if it holds the lock. Nobody else can
-- reserve fences while it does, so its block ends at the last fence issued.
local function held()
  if redis.call('HEXISTS', lockKey, token) == 1 then
    local f = tonumber(redis.call('HGET', lockKey, 'fence'))
    local n = (tonumber(redis.call('GET', fenceKey)) or f) - f + 1
    if n < 1 then n = 1 end
    return {f, redis.call('PTTL', lockKey), n}
  end
  return nil
end

-- serve hands the free lock to the queue's head; the caller takes it if it
-- is the head, or if nobody waits. It returns the caller's grant, or nil.
local function serve()
  local w, f = handoff()
  if w == nil then return grant(token, ARGV[3], tonumber(ARGV[4])) end
  if w == token then return f end
  return nil
end
