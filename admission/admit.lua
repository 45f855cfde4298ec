-- One step of a voucher's admission, run by every instance's ticker: it is
-- computed from Redis's clock and what the keys hold, so instances running
-- it at once admit no more than one would.
-- KEYS: 1 waiting, 2 passes, 3 expiries, 4 claims in flight, 5 done,
-- 6 meta, 7 admission log (list of "ms:n", newest first).
-- ARGV: 1 units left (as the caller read them, after ARGV 2 and 3),
-- 2 the claims counter and 3 the claims in flight read before them,
-- 4 the pass's lifetime (ms), 5 at most this many passes per step.
-- Returns {admitted now, expired now, sold out (1/0)}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local meta = redis.call('HMGET', KEYS[6], 'begin', 'rate', 'next', 'claims')
if not meta[1] then return {0, 0, 0} end
local begin, rate = tonumber(meta[1]), tonumber(meta[2])

-- Passes that ran out unused give their place back.
local expired = 0
for _, u in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)) do
  local rec = redis.call('HGET', KEYS[2], u)
  redis.call('HDEL', KEYS[2], u)
  redis.call('ZREM', KEYS[3], u)
  if rec then
    redis.call('HSET', KEYS[5], u, rec .. ':e')
    expired = expired + 1
  end
end
if expired > 0 then redis.call('HINCRBY', KEYS[6], 'expired', expired) end
-- A claim whose instance died before settling stops counting.
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - 30000)

-- Units that could still be bought: those left, less the orders whose
-- claims were in flight or made since the caller read the units; room,
-- those less the live passes: the units still to be admitted, kept in
-- meta for the polls' promise (poll.lua).
local units = tonumber(ARGV[1])
local room = units - tonumber(ARGV[3]) - (tonumber(meta[4] or '0') - tonumber(ARGV[2]))
room = room - redis.call('HLEN', KEYS[2])
redis.call('HSET', KEYS[6], 'room', math.max(0, room))
if now < begin then return {0, expired, 0} end

if units <= 0 then
  -- Sold out: every waiting ticket of this round reads sold_out; those
  -- who join after units come back form the next round.
  if redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('HINCRBY', KEYS[6], 'round', 1)
    redis.call('UNLINK', KEYS[1])
  end
  return {0, expired, 1}
end

-- Pacing: one slot every 1000/rate ms, at most a tenth of a second's
-- worth saved up, and never more than rate in the last 1000 ms.
local d = 1000 / rate
local cap = math.max(1, math.floor(rate / 10))
local nxt = math.max(tonumber(meta[3] or begin), begin, now - (cap - 1) * d)
local pace = 0
if nxt <= now then pace = math.floor((now - nxt) / d) + 1 end
local log = redis.call('LRANGE', KEYS[7], 0, -1)
local recent, keep = 0, 0
for i, e in ipairs(log) do
  local ms, n = string.match(e, '^(%d+):(%d+)$')
  if tonumber(ms) <= now - 1000 then break end
  recent, keep = recent + tonumber(n), i
end
if keep < #log then redis.call('LTRIM', KEYS[7], 0, keep - 1) end
local n = math.min(pace, rate - recent, room, tonumber(ARGV[5]))
if n <= 0 then
  redis.call('HSET', KEYS[6], 'next', nxt)
  return {0, expired, 0}
end
local popped = redis.call('ZPOPMIN', KEYS[1], n)
n = #popped / 2
local exp = now + tonumber(ARGV[4])
if n > 0 then
  -- A command per 500 passes (unpack's stack is bounded), not three per
  -- pass: the pass ids are first+1 .. first+n.
  local first = redis.call('HINCRBY', KEYS[6], 'pass', n) - n
  for from = 1, #popped, 1000 do
    local recs, exps, k = {}, {}, 0
    for i = from, math.min(from + 998, #popped - 1), 2 do
      first = first + 1
      recs[k + 1], recs[k + 2] = popped[i], popped[i + 1] .. ':' .. first .. ':' .. exp
      exps[k + 1], exps[k + 2] = exp, popped[i]
      k = k + 2
    end
    redis.call('HSET', KEYS[2], unpack(recs))
    redis.call('ZADD', KEYS[3], unpack(exps))
  end
  redis.call('LPUSH', KEYS[7], now .. ':' .. n)
  redis.call('HINCRBY', KEYS[6], 'admitted', n)
  redis.call('HSET', KEYS[6], 'room', math.max(0, room - n))
  nxt = nxt + n * d
end
redis.call('HSET', KEYS[6], 'next', nxt)
return {n, expired, 0}
