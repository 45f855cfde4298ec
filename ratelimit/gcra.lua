-- GCRA (generic cell rate algorithm) for one key, timed by the Redis clock.
-- KEYS[1]: the key holding the theoretical arrival time (TAT) in µs.
-- ARGV[1]: emission interval in µs (1e6 / rate); ARGV[2]: burst.
-- Returns {1, 0} when allowed, {0, µs until allowed} when not.
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
  tat = now
end
local new_tat = tat + interval
local allow_at = new_tat - burst * interval
if allow_at > now then
  return {0, allow_at - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, 0}
