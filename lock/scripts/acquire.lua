-- acquire: take the lock if it is free and nobody is queued for it;
-- otherwise queue the caller if ARGV[5] is "1".
-- Returns 0 if the caller does not hold the lock, else its grant (see
-- common.lua). Running it twice with one token is harmless (rueidis may
-- retry it).

-- Fast path: free and nobody queued (reserve and grant, inlined).
if redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then
  local f = redis.call('INCRBY', KEYS[3], ARGV[4])
  if f <= 1024 then
    local t = redis.call('TIME')
    f = t[1] * 1000000 + t[2] + ARGV[4] - 1
    redis.call('SET', KEYS[3], string.format('%d', f), 'PX', string.match(ARGV[2], '^%d+:(%d+):'))
  end
  if ARGV[4] ~= '1' then f = f - ARGV[4] + 1 end
  redis.call('HSET', KEYS[1], ARGV[1], 1, 'fence', string.format('%d', f))
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return f
end

-- #include common.lua

local mine = held()
if mine then return mine end
if redis.call('EXISTS', lockKey) == 0 then
  -- Free, yet waiters are queued: the last holder expired without handing
  -- off. Serve the queue first; take the lock only if nobody waits.
  local f = serve()
  if f then return f end
end
if ARGV[5] == '1' then enqueue(token, ARGV[3], ARGV[4]) end
return 0
