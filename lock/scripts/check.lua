-- check: the fallback of a queued waiter that may have missed its push.
-- Returns the grant if the caller holds the lock. If the lock is free, it
-- hands it to the queue (the caller takes it if first, or if nobody
-- waits). Otherwise it keeps the caller queued (re-queueing it at the tail
-- if its queue expired) and the queue alive. Returns like acquire.

-- #include common.lua

local mine = held()
if mine then return mine end
if redis.call('EXISTS', lockKey) == 0 then
  local f = serve()
  if f then return f end
end
enqueue(token, ARGV[3], ARGV[4])
return 0
