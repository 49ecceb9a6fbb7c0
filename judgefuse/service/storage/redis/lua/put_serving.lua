-- KEYS: threshold counter, thresholds hash, model counter, models hash. ARGV: expected threshold
-- version, expected model version, the threshold's JSON and the model's JSON (each '' when not
-- written). Compare-and-set of the serving pair: {threshold version, model version} after the
-- write, or {-1, -1} when the latest versions are not the expected ones (nothing written).
local t = tonumber(redis.call('GET', KEYS[1]) or '0')
local m = tonumber(redis.call('GET', KEYS[3]) or '0')
if t ~= tonumber(ARGV[1]) or m ~= tonumber(ARGV[2]) then return {-1, -1} end
if ARGV[3] ~= '' then
  t = redis.call('INCR', KEYS[1])
  redis.call('HSET', KEYS[2], t, ARGV[3])
end
if ARGV[4] ~= '' then
  m = redis.call('INCR', KEYS[3])
  redis.call('HSET', KEYS[4], m, ARGV[4])
end
return {t, m}
