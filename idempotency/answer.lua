-- answer.lua keeps a request's answer under its idempotency key, if the
-- request still holds the key; or gives the key up (ARGV[3] empty), so a
-- retry runs anew, and takes it off the buyer's count.
--
-- KEYS[1] the key's record, KEYS[2] the buyer's count of keys (claim.lua)
-- ARGV[1] the request's token, ARGV[2] its fingerprint, ARGV[3] the answer
-- (JSON; "" to give the key up), ARGV[4] how long to keep it, ms
--
-- Returns 1 when it wrote, 0 when the request had lost the key (its lease
-- ran out and another request took it).
if redis.call('GET', KEYS[1]) ~= 'p|' .. ARGV[2] .. '|' .. ARGV[1] then
  return 0
end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
  -- The count goes with its last key: a refusal leaves nothing behind.
  if tonumber(redis.call('GET', KEYS[2]) or '0') > 1 then
    redis.call('DECR', KEYS[2])
  else
    redis.call('DEL', KEYS[2])
  end
else
  redis.call('SET', KEYS[1], 'd|' .. ARGV[2] .. '|' .. ARGV[3], 'PX', ARGV[4])
end
return 1
