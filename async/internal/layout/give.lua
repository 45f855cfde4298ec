-- give.lua is step 2 of moving stock between two shards of a voucher
-- (shard.go): on the recipient it adds the move's units once, however
-- often it runs for one move id (a mover and a recoverer may both run it).
--
-- KEYS[1] recipient meta hash, KEYS[2] recipient applied set (move ids)
-- ARGV[1] move id, ARGV[2] units
--
-- Returns 1 when it added the units, 0 when the move was added before,
-- -1 when the recipient is not loaded (the move stays in the donor's
-- journal for a reload or reconcile).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'stock', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'initial', ARGV[2])
return 1
