-- dead.lua moves an order that can never be persisted to the voucher's
-- dead-letter stream: only if its entry is still pending (nobody else
-- persisted it meanwhile) and the order is not dead-lettered already, it
-- appends the order with the reason, marks it dead in the tries hash
-- (field "<entry>/<order>", which the worker reads when its entry comes
-- back, so the order is passed over, and deletes once the entry is
-- acknowledged) and marks the user's order failed. The entry stays
-- pending: it holds a gate batch, whose other orders may still be on their
-- way, and the worker acknowledges it once they all are settled. So an
-- order is never in neither stream; a consumer that dies before the ack
-- leaves it in both, and the next one settles the rest of the entry.
--
-- KEYS[1] orders stream, KEYS[2] dead-letter stream, KEYS[3] failed hash,
-- KEYS[4] tries hash
-- ARGV[1] consumer group, ARGV[2] entry id, ARGV[3] order id, ARGV[4] user
-- id, ARGV[5] reason, ARGV[6] deliveries, ARGV[7] kind (the
-- machine-readable reason, see DeadKind), ARGV[8] quantity
--
-- Returns 1 when it dead-lettered the order, 0 when its entry was not
-- pending or the order was dead-lettered already.
local pending = redis.pcall('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if type(pending) ~= 'table' or pending.err or #pending == 0 then
  return 0 -- acknowledged, or the stream or its group is gone
end
local mark = ARGV[2] .. '/' .. ARGV[3]
if redis.call('HGET', KEYS[4], mark) == 'dead' then
  return 0
end
local fields = {'o', ARGV[3], 'u', ARGV[4], 'reason', ARGV[5], 'entry', ARGV[2], 'deliveries', ARGV[6], 'kind', ARGV[7]}
if ARGV[8] ~= '1' then
  table.insert(fields, 'q')
  table.insert(fields, ARGV[8])
end
redis.call('XADD', KEYS[2], '*', unpack(fields))
redis.call('HSET', KEYS[4], mark, 'dead')
if ARGV[4] ~= '' and ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[4], ARGV[3])
end
return 1
