-- claim.lua claims an idempotency key for one request, or reads who holds
-- it.
--
-- KEYS[1] the key's record
-- ARGV[1] this request's token, ARGV[2] its fingerprint, ARGV[3] the lease
--         in ms
--
-- The record is "p|<fingerprint>|<token>" while a request holds the key
-- and "d|<fingerprint>|<answer>" once it answered. Returns {1} when this
-- request holds the key now, or {0, record} when another request's record
-- is there.
local rec = redis.call('GET', KEYS[1])
if rec then
  return {0, rec}
end
redis.call('SET', KEYS[1], 'p|' .. ARGV[2] .. '|' .. ARGV[1], 'PX', ARGV[3])
return {1}
