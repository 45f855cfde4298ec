-- take.lua is step 1 of moving stock between two shards of a voucher
-- (shard.go): on the donor it takes half its stock (at least one unit),
-- or the units the recipient wants if that is more (as many as it has),
-- and records the move in its journal, atomically, so no unit is ever
-- outside both a shard's stock and a journal.
--
-- KEYS[1] donor meta hash, KEYS[2] donor moves hash (move id -> "<to>:<n>")
-- ARGV[1] move id, ARGV[2] the recipient's tag body, ARGV[3] the units it
-- wants (optional)
--
-- Returns the units taken: 0 when the donor has none (or is not loaded).
local stock = tonumber(redis.call('HGET', KEYS[1], 'stock'))
if not stock or stock <= 0 then
  return 0
end
local n = math.max(math.ceil(stock / 2), math.min(tonumber(ARGV[3]) or 0, stock))
redis.call('HINCRBY', KEYS[1], 'stock', -n)
redis.call('HINCRBY', KEYS[1], 'initial', -n)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. n)
return n
