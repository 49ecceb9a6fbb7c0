-- KEYS: record, labelled, labelled-by-panel, acc:keys, review counts, queue, queue strata,
--        lease owners, review leases, audit leases, label history, then per accumulator: total,
--        hours, hour.
-- ARGV: sha1(expected current value), new (unlabelled) value, id, hour, stratum of the stamp
--        ('' without one), queued ('1'/'0'), rank, annotator, lease expiry, history entry,
--        history cap, then from ARGV[12] per accumulator: name, field count, field, delta, ...
-- An undo (the annotator page's): the record loses its label, the label's increments are
-- subtracted, the stratum's labelled count goes down, and a queued item returns to the queue
-- leased to the annotator. Returns 1 done, 0 the record changed (retry), -1 no record, -2 a
-- field would overflow. Every check runs before the first write.
-- (runs after increments.lua, whose plan() and apply() it calls)
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
if redis.sha1hex(cur) ~= ARGV[1] then return 0 end
local planned = plan(12, 12)
if not planned then return -2 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[3])
local stratum = ARGV[5]
if stratum ~= '' then
  redis.call('HINCRBY', KEYS[5], 'labelled:' .. stratum, -1)
  if ARGV[6] == '1' and redis.call('ZADD', KEYS[6], ARGV[7], ARGV[3]) == 1 then
    redis.call('HSET', KEYS[7], ARGV[3], stratum)
    redis.call('HINCRBY', KEYS[5], 'inqueue:' .. stratum, 1)
    local leases = KEYS[9]
    if stratum == 'audit' then leases = KEYS[10] end
    redis.call('ZADD', leases, ARGV[9], ARGV[3])
    redis.call('HSET', KEYS[8], ARGV[3], ARGV[8])
  end
end
append_history(KEYS[11], ARGV[10], ARGV[11])
apply(planned, KEYS[4], ARGV[4])
return 1
