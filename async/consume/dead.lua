-- dead.lua moves an entry that can never be persisted to the voucher's
-- dead-letter stream: it acknowledges the entry and, only if it was still
-- pending (nobody else persisted it meanwhile), appends it with the reason
-- and marks the user's order failed. One script, so the entry is never in
-- neither stream.
--
-- KEYS[1] orders stream, KEYS[2] dead-letter stream, KEYS[3] failed hash
-- ARGV[1] consumer group, ARGV[2] entry id, ARGV[3] order id, ARGV[4] user
-- id, ARGV[5] reason, ARGV[6] deliveries, ARGV[7] kind (the
-- machine-readable reason, see DeadKind), ARGV[8] quantity
--
-- Returns 1 when it dead-lettered the entry, 0 when it was not pending.
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
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
