-- KEYS: queue, queue strata, lease owners, review leases, audit leases.
-- ARGV: now, lease expiry, annotator, n.
-- Expired leases are swept first, so afterwards an item has an owner exactly when it has a
-- live lease; the first n + (live leases) items in rank order then hold every free item the
-- call can take, and one ZRANGE reads them. Returns the leased ids in rank order.
for _, key in ipairs({KEYS[4], KEYS[5]}) do
  local expired = redis.call('ZRANGEBYSCORE', key, '-inf', ARGV[1])
  for _, id in ipairs(expired) do redis.call('HDEL', KEYS[3], id) end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1]) end
end
local n = tonumber(ARGV[4])
local live = redis.call('ZCARD', KEYS[4]) + redis.call('ZCARD', KEYS[5])
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, n + live - 1)) do
  if redis.call('HEXISTS', KEYS[3], id) == 0 then
    local leases = KEYS[4]
    if redis.call('HGET', KEYS[2], id) == 'audit' then leases = KEYS[5] end
    redis.call('ZADD', leases, ARGV[2], id)
    redis.call('HSET', KEYS[3], id, ARGV[3])
    out[#out + 1] = id
    if #out >= n then break end
  end
end
return out
