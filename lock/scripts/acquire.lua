-- acquire: take the lock if it is free and nobody is queued for it;
-- otherwise queue the caller if ARGV[4] is "1".
-- Returns {1, fence, lease ms} if the caller now holds the lock, else {0}.
-- Running it twice with one token is harmless (rueidis may retry it).

-- Fast path: free and nobody queued (nextFence and grant, inlined).
if redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then
  local f = redis.call('INCR', KEYS[3])
  if f == 1 then
    local t = redis.call('TIME')
    f = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', KEYS[3], f, 'PX', string.match(ARGV[3], '^%d+:(%d+):'))
  end
  redis.call('HSET', KEYS[1], ARGV[1], 1, 'fence', f)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, f, tonumber(ARGV[2])}
end

-- #include common.lua

local mine = held()
if mine then return mine end
if redis.call('EXISTS', lockKey) == 0 then
  -- Free, yet waiters are queued: the last holder expired without handing
  -- off. Serve the queue first; take the lock only if nobody waits.
  local w, f, px = handoff()
  if w == nil then return {1, grant(token, ARGV[2]), tonumber(ARGV[2])} end
  if w == token then return {1, f, px} end
end
if ARGV[4] == '1' then enqueue(token, ARGV[2]) end
return {0}
