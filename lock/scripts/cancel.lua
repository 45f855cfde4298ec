-- cancel: a queued waiter gives up. Removes it from the queue; if the lock
-- was handed to it meanwhile, passes it on to the next waiter.
-- Returns 1 if it released a grant, 0 otherwise.

-- #include common.lua

redis.call('ZREM', queueKey, token .. '/' .. ARGV[3] .. '/' .. ARGV[4])
if redis.call('HEXISTS', lockKey, token) == 1 then
  redis.call('DEL', lockKey)
  handoff()
  return 1
end
return 0
