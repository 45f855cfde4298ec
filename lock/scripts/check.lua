-- check: the fallback of a queued waiter that may have missed its push.
-- Returns the grant if the caller holds the lock. If the lock is free, it
-- hands it to the queue (the caller takes it if first, or if nobody
-- waits). Otherwise it keeps the caller queued (re-queueing it at the tail
-- if its queue expired) and the queue alive. Returns like acquire.

-- #include common.lua

local mine = held()
if mine then return mine end
if redis.call('EXISTS', lockKey) == 0 then
  local w, f, px = handoff()
  if w == nil then return {1, grant(token, ARGV[2]), tonumber(ARGV[2])} end
  if w == token then return {1, f, px} end
end
enqueue(token, ARGV[2])
return {0}
