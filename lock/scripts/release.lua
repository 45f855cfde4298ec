-- release: drop one hold of the caller (a turn's token); at the last one
-- free the lock and hand it directly to the next waiter.
--
-- The caller's client may name its next local waiter (ARGV[3] to ARGV[6]).
-- If its turn is not over (ARGV[6] is "1") or nobody else is queued, the
-- lock goes straight to that waiter, and the reply carries the grant: the
-- client wakes it without a push. Otherwise the waiter joins the queue,
-- behind the other clients' waiters, and the lock goes to the queue's head.
--
-- Returns the holds left (-1 if the caller does not hold the lock), or
-- {first fence, lease ms, block} when the lock went to the named waiter.

-- Fast path: the last hold, no local waiter named, nobody queued.
local n = redis.call('HGET', KEYS[1], ARGV[1])
if n == '1' and not ARGV[3] and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1])
  return 0
end

-- #include common.lua

if not n then
  -- Not ours (expired or taken over): queue the local waiter, and serve
  -- the queue if the lock is free.
  if ARGV[3] then enqueue(ARGV[3], ARGV[4], ARGV[5]) end
  if redis.call('EXISTS', lockKey) == 0 then handoff() end
  return -1
end
if n ~= '1' then return redis.call('HINCRBY', lockKey, token, -1) end
redis.call('DEL', lockKey)
if ARGV[3] then
  if ARGV[6] == '1' or redis.call('EXISTS', queueKey) == 0 then
    -- The waiter may have queued itself meanwhile (the client keeps it
    -- from doing so, but an entry left behind would be granted to a
    -- token nobody waits for).
    redis.call('ZREM', queueKey, ARGV[3] .. '/' .. ARGV[4] .. '/' .. ARGV[5])
    local b = tonumber(ARGV[5])
    return {grant(ARGV[3], ARGV[4], b), tonumber(ARGV[4]), b}
  end
  enqueue(ARGV[3], ARGV[4], ARGV[5])
end
handoff()
return 0
