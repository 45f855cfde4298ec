-- extend: set the lease of a lock the caller holds.
-- KEYS[1] lock hash; ARGV[1] token; ARGV[2] lease ms; ARGV[3], optional:
-- the first fence of the caller's grant, which the lock must still carry
-- (a grant learned of late may have run out and the lock been granted to
-- the same token again, with a newer block).
-- Returns 1 if extended, 0 if the caller does not hold the lock.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 and (not ARGV[3] or redis.call('HGET', KEYS[1], 'fence') == ARGV[3]) then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
