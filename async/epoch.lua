-- epoch.lua returns the Redis epoch: a random id the first service to find
-- it missing writes, so that a service that remembers another one (or
-- finds none) knows Redis lost its data since it last looked.
--
-- KEYS[1] epoch key
-- ARGV[1] the epoch to write if there is none
--
-- Returns {created (1 or 0), epoch}.
local cur = redis.call('GET', KEYS[1])
if cur then
  return {0, cur}
end
redis.call('SET', KEYS[1], ARGV[1])
return {1, ARGV[1]}
