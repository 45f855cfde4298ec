-- claim.lua claims an idempotency key for one request, or reads who holds
-- it, within the buyer's bound of keys for the voucher.
--
-- KEYS[1] the key's record, KEYS[2] the buyer's count of keys (same tag)
-- ARGV[1] this request's token, ARGV[2] its fingerprint, ARGV[3] the lease
--         in ms, ARGV[4] the most keys a buyer holds for a voucher,
--         ARGV[5] how long answers are kept, ms
--
-- The record is "p|<fingerprint>|<token>" while a request holds the key
-- and "d|<fingerprint>|<answer>" once it answered. Returns {1} when this
-- request holds the key now, {0, record} when another request's record
-- is there, or {2, ms} when the buyer holds ARGV[4] keys already (ms:
-- until the count runs out).
--
-- The count lives at least as long as any key it counts (its expiry is
-- pushed to the keep time at every new key, and a key lives at most its
-- lease plus the keep time from its claim), so a buyer never holds more
-- than ARGV[4] keys of a voucher; a key given up is taken off (answer.lua).
local rec = redis.call('GET', KEYS[1])
if rec then
  return {0, rec}
end
local n = tonumber(redis.call('GET', KEYS[2]) or '0')
if n >= tonumber(ARGV[4]) then
  return {2, redis.call('PTTL', KEYS[2])}
end
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]) + tonumber(ARGV[3]))
redis.call('SET', KEYS[1], 'p|' .. ARGV[2] .. '|' .. ARGV[1], 'PX', ARGV[3])
return {1}
