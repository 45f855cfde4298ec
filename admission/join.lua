-- Join a voucher's waiting room, or find the buyer's place in it, for a
-- batch of buyers in order. KEYS: 1 waiting (zset user -> score),
-- 2 passes (hash user -> record), 3 meta (hash). ARGV: 1 the sale's begin
-- (ms), 2 admit_per_second, then per buyer: user, a random score in
-- [0, 2^52).
-- Returns the round, the units still to be admitted as the last step
-- counted them ('' before any) and the live passes, then per buyer
-- {state, score, rank, record}:
-- "waiting" with the score and 0-based rank, or "admitted" with the live
-- pass's record ("score:pass:expiry"). Before begin a joiner's score is
-- the random one (the early joiners' order is a shuffle); from begin on
-- it is 2^52 plus a join sequence, so later joiners come after them,
-- first come first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local meta = redis.call('HMGET', KEYS[3], 'begin', 'rate', 'round', 'room')
if not meta[1] then redis.call('HSET', KEYS[3], 'begin', ARGV[1]) end
if meta[2] ~= ARGV[2] then redis.call('HSET', KEYS[3], 'rate', ARGV[2]) end
local early = now < tonumber(ARGV[1])
local out = {meta[3] or '0', meta[4] or '', redis.call('HLEN', KEYS[2])}
for i = 3, #ARGV, 2 do
  local user = ARGV[i]
  local s = redis.call('ZSCORE', KEYS[1], user)
  local rec = not s and redis.call('HGET', KEYS[2], user)
  if s then
    out[#out + 1] = {'waiting', s, redis.call('ZRANK', KEYS[1], user), ''}
  elseif rec then
    out[#out + 1] = {'admitted', string.match(rec, '^[^:]+'), 0, rec}
  else
    local score = ARGV[i + 1]
    if not early then
      score = string.format('%.0f', 4503599627370496 + redis.call('HINCRBY', KEYS[3], 'seq', 1))
    end
    redis.call('ZADD', KEYS[1], score, user)
    out[#out + 1] = {'waiting', score, redis.call('ZRANK', KEYS[1], user), ''}
  end
end
return out
