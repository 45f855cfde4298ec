-- reenter: add a hold to a lock the caller holds.
-- KEYS[1] lock hash; ARGV[1] token.
-- Returns the new hold count, or 0 if the caller does not hold the lock.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
end
return 0
