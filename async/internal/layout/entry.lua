-- entry.lua is put before the scripts that read orders stream entries
-- (EntryLua): entry_orders reads one entry's fields, as layout.ParseEntry
-- does in Go; unacked_entries lists the entries a group still needs.

-- entry_orders returns the orders of an entry's fields (a flat array), in
-- a list of {order, user, q, key} (key nil for none): the entry's one
-- order (field 'o', written by requeue.lua and by gates before issue 34's
-- batch entries), or each order of a gate batch (order id -> "<user>" or
-- "<user> <quantity> <pay_by> <key>").
local function entry_orders(f)
  local out = {}
  for i = 1, #f, 2 do
    if f[i] == 'o' then
      local o = {q = 1}
      for j = 1, #f, 2 do
        local name, v = f[j], f[j + 1]
        if name == 'o' then o.order = v elseif name == 'u' then o.user = v
        elseif name == 'q' then o.q = tonumber(v) elseif name == 'k' then o.key = v end
      end
      out[1] = o
      return out
    end
  end
  for i = 1, #f, 2 do
    local v = f[i + 1]
    local user, q, _, key = string.match(v, '^(%S+) (%d+) (%d+) (.*)$')
    if user then
      if key == '' then
        key = nil
      end
      out[#out + 1] = {order = f[i], user = user, q = tonumber(q), key = key}
    else
      out[#out + 1] = {order = f[i], user = v, q = 1}
    end
  end
  return out
end

-- unacked_entries returns the entries of the stream that the group has
-- not acknowledged: not delivered yet (after its last delivered entry),
-- or delivered and pending; the whole stream when the group does not
-- exist. Acknowledged entries left before the trim point are not listed.
local function unacked_entries(stream, group)
  if redis.call('EXISTS', stream) == 0 then
    return {}
  end
  local last = nil
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local info = {}
    for i = 1, #g, 2 do
      info[g[i]] = g[i + 1]
    end
    if info['name'] == group then
      last = info['last-delivered-id']
    end
  end
  if not last then
    return redis.call('XRANGE', stream, '-', '+')
  end
  local out = redis.call('XRANGE', stream, '(' .. last, '+')
  local n = redis.call('XPENDING', stream, group)[1]
  if n > 0 then
    for _, p in ipairs(redis.call('XPENDING', stream, group, '-', '+', n)) do
      local e = redis.call('XRANGE', stream, p[1], p[1])
      if #e > 0 then
        out[#out + 1] = e[1]
      end
    end
  end
  return out
end

