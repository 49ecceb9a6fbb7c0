-- KEYS: record, records index, labelled, labelled-by-panel, label history. ARGV: id, sha1 of the record as
-- read ('' when it was already gone: an expired record, whose index entries are removed).
-- Returns 1 deleted (or its index entries removed), 0 the record changed since it was read.
local cur = redis.call('GET', KEYS[1])
if cur then
  if redis.sha1hex(cur) ~= ARGV[2] then return 0 end
  redis.call('DEL', KEYS[1], KEYS[5])
elseif ARGV[2] ~= '' then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
