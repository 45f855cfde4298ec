-- Claim a pass for an order. KEYS: 1 passes, 2 expiries (zset user ->
-- ms), 3 claims in flight (zset user -> ms), 4 done, 5 meta. ARGV: 1
-- user, 2 pass id, 3 expiry (ms).
-- Returns the pass's record when it was this buyer's live pass (now
-- claimed: out of the unused passes, counted in flight), or false.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return false end
local score, pass, exp = string.match(rec, '^([^:]+):([^:]+):([^:]+)$')
if pass ~= ARGV[2] or exp ~= ARGV[3] or tonumber(exp) <= now then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], now, ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], rec .. ':c')
redis.call('HINCRBY', KEYS[5], 'claims', 1)
return rec
