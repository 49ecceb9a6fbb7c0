-- KEYS: record, review counts, queue, queue strata, acc:keys, recent-by-panel, records index,
--        then per accumulator: total, hours, hour.
-- ARGV: record JSON, id, stratum ('' without a stamp), queued ('1'/'0'), rank, hour, created_at
--        (the score of both indexes), recent cap, expiry in epoch ms ('' none: see "Retention"),
--        then per accumulator: name, field count, field, delta, ...
-- Returns 1 created, 0 identical record already there (nothing written), -1 a different record
-- under this id, -2 a field would overflow (nothing written).
-- (runs after increments.lua, whose plan() and apply() it calls)
local cur = redis.call('GET', KEYS[1])
if cur then
  if cur == ARGV[1] then return 0 end
  return -1
end
local planned = plan(10, 8)
if not planned then return -2 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[6], ARGV[7], ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[6], 0, -(tonumber(ARGV[8]) + 1))
redis.call('ZADD', KEYS[7], ARGV[7], ARGV[2])
if ARGV[9] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[9]) end
if ARGV[3] ~= '' then
  redis.call('HINCRBY', KEYS[2], 'routed:' .. ARGV[3], 1)
  if ARGV[4] == '1' then
    redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
    redis.call('HSET', KEYS[4], ARGV[2], ARGV[3])
    redis.call('HINCRBY', KEYS[2], 'inqueue:' .. ARGV[3], 1)
  end
end
apply(planned, KEYS[5], ARGV[6])
return 1
