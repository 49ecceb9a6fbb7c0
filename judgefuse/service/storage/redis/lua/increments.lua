-- Shared by the save and label scripts. plan(a, k) reads accumulators from ARGV[a..] (name,
-- field count, field, delta, ...) and their keys from KEYS[k..] (total, hours, hour bucket per
-- accumulator) and checks every field for overflow before anything is written: it returns
-- nil when one would overflow, else what apply() writes.
local function plan(a, k)
  local INT = '^%-?%d+$'
  local accs = {}
  local ops = {}
  while a <= #ARGV do
    local n = tonumber(ARGV[a + 1])
    accs[#accs + 1] = {ARGV[a], KEYS[k + 1]}
    a = a + 2
    for _ = 1, n do
      local field, delta = ARGV[a], ARGV[a + 1]
      a = a + 2
      for _, hash in ipairs({KEYS[k], KEYS[k + 2]}) do
        local old = redis.call('HGET', hash, field)
        local int = string.find(delta, INT) ~= nil and (not old or string.find(old, INT) ~= nil)
        local limit = 1e300
        if int then limit = 9.2e18 end
        if math.abs(tonumber(old or '0')) + math.abs(tonumber(delta)) >= limit then
          return nil
        end
        ops[#ops + 1] = {hash, field, delta, int}
      end
    end
    k = k + 3
  end
  return {accs, ops}
end

local function apply(planned, keys_key, hour)
  for _, acc in ipairs(planned[1]) do
    redis.call('ZADD', keys_key, 0, acc[1])
    redis.call('ZADD', acc[2], hour, hour)
  end
  for _, op in ipairs(planned[2]) do
    if op[4] then
      redis.call('HINCRBY', op[1], op[2], op[3])
    else
      redis.call('HINCRBYFLOAT', op[1], op[2], op[3])
    end
  end
end
