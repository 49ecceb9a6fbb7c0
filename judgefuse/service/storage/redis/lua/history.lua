-- append_history(key, body, keep): the verdict's label history (a list, oldest first) gains
-- body (an entry's JSON without its seq, from '{') numbered after the newest entry, and keeps
-- only the newest keep entries. Called by label.lua and unlabel.lua after their checks, so
-- the entry is written in the same script as the label it records.
local function append_history(key, body, keep)
  local last = redis.call('LINDEX', key, -1)
  local seq = 1
  if last then seq = tonumber(cjson.decode(last)['seq']) + 1 end
  redis.call('RPUSH', key, '{"seq":' .. string.format('%d', seq) .. ',' .. string.sub(body, 2))
  redis.call('LTRIM', key, -tonumber(keep), -1)
end
