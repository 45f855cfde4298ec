-- Join a voucher's waiting room, or find the buyer's place in it.
-- KEYS: 1 waiting (zset user -> score), 2 passes (hash user -> record),
-- 3 meta (hash). ARGV: 1 user, 2 a random score in [0, 2^52), 3 the
-- sale's begin (ms), 4 admit_per_second.
-- Returns {state, score, round, rank, record}: "waiting" with the score
-- and 0-based rank, or "admitted" with the live pass's record
-- ("score:pass:expiry"). Before begin a joiner's score is the random one
-- (the early joiners' order is a shuffle); from begin on it is 2^52 plus
-- a join sequence, so later joiners come after them, first come first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSETNX', KEYS[3], 'begin', ARGV[3])
redis.call('HSET', KEYS[3], 'rate', ARGV[4])
local round = redis.call('HGET', KEYS[3], 'round') or '0'
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s then
  return {'waiting', s, round, redis.call('ZRANK', KEYS[1], ARGV[1]), ''}
end
local rec = redis.call('HGET', KEYS[2], ARGV[1])
if rec then
  return {'admitted', string.match(rec, '^[^:]+'), round, 0, rec}
end
local score
if now < tonumber(ARGV[3]) then
  score = ARGV[2]
else
  score = string.format('%.0f', 4503599627370496 + redis.call('HINCRBY', KEYS[3], 'seq', 1))
end
redis.call('ZADD', KEYS[1], score, ARGV[1])
return {'waiting', score, round, redis.call('ZRANK', KEYS[1], ARGV[1]), ''}
