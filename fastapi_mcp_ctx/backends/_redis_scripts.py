"""The Lua scripts of the Redis state backend, one per compound write (and the scan).

Key layout under the backend's namespace (see ``backends.redis``): ``<ns>v:<key>`` holds a
value (a STRING with a native PX expiry when a TTL was given), ``<ns>idx`` a ZSET of every key
at score 0 for ordered prefix scans. Each script touches a value and the index in one atomic
round trip; ``SCAN`` also removes index entries whose value has expired (lazy purge).
"""

from __future__ import annotations

__all__ = ["DELETE_MANY", "SCAN", "SET", "SET_MANY", "TAKE"]

# KEYS = value key, idx; ARGV = value, ttl_ms ('' = none), key.
SET = """
if ARGV[2] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
redis.call('ZADD', KEYS[2], 0, ARGV[3])
return 1
"""

# KEYS = idx, value keys...; ARGV = ttl_ms ('' = none), then (key, value) pairs.
SET_MANY = """
local n = #KEYS - 1
for i = 1, n do
  local v = ARGV[2 * i + 1]
  if ARGV[1] == '' then
    redis.call('SET', KEYS[i + 1], v)
  else
    redis.call('SET', KEYS[i + 1], v, 'PX', ARGV[1])
  end
  redis.call('ZADD', KEYS[1], 0, ARGV[2 * i])
end
return n
"""

TAKE = """
local v = redis.call('GETDEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return v
"""

# KEYS = idx, value keys...; ARGV = keys...
DELETE_MANY = """
local n = 0
for i = 2, #KEYS do
  n = n + redis.call('DEL', KEYS[i])
  redis.call('ZREM', KEYS[1], ARGV[i - 1])
end
return n
"""

# KEYS = idx; ARGV = value-key prefix, lo, hi, limit. Returns {k1, v1, k2, v2, ...}.
SCAN = """
local idx, vp, lo, hi = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local limit = tonumber(ARGV[4])
local out, found = {}, 0
while found < limit do
  local batch = limit - found
  if batch < 32 then batch = 32 end
  local members = redis.call('ZRANGEBYLEX', idx, lo, hi, 'LIMIT', 0, batch)
  if #members == 0 then break end
  for _, m in ipairs(members) do
    local v = redis.call('GET', vp .. m)
    if v then
      if found < limit then
        out[#out + 1] = m
        out[#out + 1] = v
        found = found + 1
      end
    else
      redis.call('ZREM', idx, m)
    end
    lo = '(' .. m
    if found >= limit then break end
  end
  if #members < batch then break end
end
return out
"""
