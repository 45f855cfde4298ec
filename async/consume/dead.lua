-- dead.lua moves an order that can never be persisted to the voucher's
-- dead-letter stream: only if its entry is still pending (nobody else
-- persisted it meanwhile) and the order is not dead-lettered already (its
-- entry delivered again after a consumer died between this and the
-- entry's ack), it appends the order with the reason and marks the user's
-- order failed. The entry stays pending: it holds a gate batch, whose
-- other orders may still be on their way, and the worker acknowledges it
-- once they all are settled. So an order is never in neither stream; a
-- consumer that dies before the ack leaves it in both, until the next
-- one settles the entry again.
--
-- KEYS[1] orders stream, KEYS[2] dead-letter stream, KEYS[3] failed hash
-- ARGV[1] consumer group, ARGV[2] entry id, ARGV[3] order id, ARGV[4] user
-- id, ARGV[5] reason, ARGV[6] deliveries, ARGV[7] kind (the
-- machine-readable reason, see DeadKind), ARGV[8] quantity
--
-- Returns 1 when it dead-lettered the order, 0 when its entry was not
-- pending or the order was dead-lettered already.
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1) == 0 then
  return 0
end
if ARGV[3] ~= '' and ARGV[4] ~= '' and redis.call('HGET', KEYS[3], ARGV[4]) == ARGV[3] then
  return 0
end
local fields = {'o', ARGV[3], 'u', ARGV[4], 'reason', ARGV[5], 'entry', ARGV[2], 'deliveries', ARGV[6], 'kind', ARGV[7]}
if ARGV[8] ~= '1' then
  table.insert(fields, 'q')
  table.insert(fields, ARGV[8])
end
redis.call('XADD', KEYS[2], '*', unpack(fields))
if ARGV[4] ~= '' and ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[4], ARGV[3])
end
return 1
