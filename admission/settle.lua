-- Settle a claimed pass once its order is answered. KEYS: as claim.lua.
-- ARGV: 1 user, 2 the pass's record, 3 the outcome: "s" spent (the order
-- was accepted), "o" burnt by a sold_out refusal, "r" released (any other
-- refusal: the pass is live again until its expiry, or expired if that
-- passed meanwhile).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[3], ARGV[1])
local outcome = ARGV[3]
if outcome == 'r' then
  local exp = tonumber(string.match(ARGV[2], '([^:]+)$'))
  if exp > now and not redis.call('HGET', KEYS[1], ARGV[1]) then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    redis.call('ZADD', KEYS[2], exp, ARGV[1])
    redis.call('HDEL', KEYS[4], ARGV[1])
    return 1
  end
  outcome = 'e'
  redis.call('HINCRBY', KEYS[5], 'expired', 1)
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2] .. ':' .. outcome)
return 1
