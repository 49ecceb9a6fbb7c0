-- KEYS: record, labelled, labelled-by-panel, acc:keys, review counts, queue, queue strata,
--        lease owners, review leases, audit leases, label history, then per accumulator: total,
--        hours, hour.
-- ARGV: sha1(expected current value), new value, score, id, hour, stratum of a first label of
--        a stamped record ('' otherwise), A-or-B flag, history entry, history cap, then per
--        accumulator: name, field count, field, delta, ... (from ARGV[10]); ARGV[7] '1' when the new label is A or B, else '0': the labelled
--        indexes hold the A/B labels only (iter_labelled, count_labelled), so a tie or
--        both-bad label takes the id out of them.
-- Returns 1 done, 0 the record changed (retry), -1 no record, -2 a field would overflow.
-- Every check runs before the first write, so a refused label writes nothing. A labelled record
-- loses any expiry (PERSIST): labels leave only through apply_retention ("Retention").
-- (runs after increments.lua, whose plan() and apply() it calls)
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
if redis.sha1hex(cur) ~= ARGV[1] then return 0 end
local planned = plan(10, 12)
if not planned then return -2 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PERSIST', KEYS[1])
if ARGV[7] == '1' then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
else
  redis.call('ZREM', KEYS[2], ARGV[4])
  redis.call('ZREM', KEYS[3], ARGV[4])
end
local stratum = ARGV[6]
if stratum ~= '' then
  redis.call('HINCRBY', KEYS[5], 'labelled:' .. stratum, 1)
  if redis.call('ZREM', KEYS[6], ARGV[4]) == 1 then
    redis.call('HINCRBY', KEYS[5], 'inqueue:' .. stratum, -1)
  end
  redis.call('HDEL', KEYS[7], ARGV[4])
  redis.call('HDEL', KEYS[8], ARGV[4])
  redis.call('ZREM', KEYS[9], ARGV[4])
  redis.call('ZREM', KEYS[10], ARGV[4])
end
append_history(KEYS[11], ARGV[8], ARGV[9])
apply(planned, KEYS[4], ARGV[5])
return 1
