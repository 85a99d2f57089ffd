"""The Lua scripts of the Redis event store (:mod:`.redis_events`): one per compound step; the
ones that read the broadcast log come in pairs (:func:`pair`): from its keys on one Redis, from
the copy the client passes on a cluster (the log is on a slot of its own)."""

from __future__ import annotations

from ..backends._redis_client import Script

__all__ = ["ADD", "APPEND", "BROADCAST", "CATCH", "CATCH_UP", "CATCH_UP_C", "DROP", "END", "FROM_ARGV", "FROM_KEYS", "HOLD", "LAPSE", "LOG", "NOW", "OPEN", "OPEN_C", "PAGE_OF", "PROMOTE", "PROMOTE_C", "TO_GET", "TO_GET_C", "pair"]

NOW = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"

# add(meta, stream, data, has_data, max_events, max_age_ms): one event, trimmed by count and age; its seq
ADD = """
local function add(meta, stream, data, has, maxlen, age)
  local seq = redis.call('HINCRBY', meta, 'seq', 1)
  if has == '1' then
    redis.call('XADD', stream, 'MAXLEN', '~', maxlen, seq .. '-' .. now, 'd', data)
  else
    redis.call('XADD', stream, 'MAXLEN', '~', maxlen, seq .. '-' .. now, 'e', '')
  end
  local cutoff = now - tonumber(age)
  local function stamp(id) return tonumber(string.sub(id, string.find(id, '-') + 1)) end
  local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
  if #first > 0 and stamp(first[1][1]) < cutoff then
    local start = '-'
    while true do
      local batch = redis.call('XRANGE', stream, start, '+', 'COUNT', 64)
      local keep = nil
      for _, e in ipairs(batch) do
        if stamp(e[1]) >= cutoff then keep = e[1] break end
      end
      if keep then redis.call('XTRIM', stream, 'MINID', keep) break end
      if #batch == 0 then break end
      start = '(' .. batch[#batch][1]
    end
  end
  return seq
end
"""

# catch_up(meta, stream, maxlen, age, ttl): the kept broadcasts after the GET stream's bm, read
# through b_range(bm, n) / b_last() (the broadcast log's keys, or on a cluster the copy the
# client read from the log's own slot: see _broadcasts)
CATCH = """
local function catch_up(meta, stream, maxlen, age, ttl)
  local m = redis.call('HMGET', meta, 'end', 'bm')
  if m[1] ~= '0' then return 0 end
  local bm = tonumber(m[2] or '0')
  local n = 0
  local cutoff = now - tonumber(age)
  for _, e in ipairs(b_range(bm, maxlen)) do
    local id = e[1]
    local dash = string.find(id, '-')
    if tonumber(string.sub(id, dash + 1)) >= cutoff then
      add(meta, stream, e[2][2], '1', maxlen, age)
      n = n + 1
    end
    bm = tonumber(string.sub(id, 1, dash - 1))
  end
  local last = b_last()
  if last > bm then bm = last end
  redis.call('HSET', meta, 'bm', bm)
  redis.call('PEXPIRE', meta, ttl)
  redis.call('PEXPIRE', stream, ttl)
  return n
end

-- the GET stream a new one continues: it takes the broadcasts it missed, then ends (readers wake)
local function take_over(meta, stream, maxlen, age, ttl, ended_ttl)
  if redis.call('HGET', meta, 'end') ~= '0' then return end
  catch_up(meta, stream, maxlen, age, ttl)
  local seq = redis.call('HGET', meta, 'seq')
  redis.call('HSET', meta, 'end', 1)
  redis.call('XADD', stream, (tonumber(seq) + 1) .. '-0', 'x', '1')
  redis.call('PEXPIRE', meta, ended_ttl)
  redis.call('PEXPIRE', stream, ended_ttl)
end
"""

# The broadcast log as catch_up reads it, with one Redis: its two keys are the script's last two.
FROM_KEYS = """
local function b_range(bm, n)
  return redis.call('XRANGE', KEYS[#KEYS], '(' .. bm .. '-18446744073709551615', '+', 'COUNT', n)
end
local function b_last() return tonumber(redis.call('HGET', KEYS[#KEYS - 1], 'seq') or '0') end
"""

# On a cluster: ARGV after the script's own (from index F + 1) is the log as the client read it:
# id, data pairs, then the last sequence.
FROM_ARGV = """
local B_LAST = tonumber(ARGV[#ARGV])
local function b_range(bm, n)
  local out = {}
  for i = F + 1, #ARGV - 1, 2 do
    local id = ARGV[i]
    if tonumber(string.sub(id, 1, string.find(id, '-') - 1)) > bm and #out < tonumber(n) then
      out[#out + 1] = {id, {'d', ARGV[i + 1]}}
    end
  end
  return out
end
local function b_last() return B_LAST end
"""


def pair(body: str, fixed_argv: int) -> tuple[Script, Script]:
    """The script reading the broadcast log from its keys (one Redis) and its cluster twin
    reading the copy passed after its ``fixed_argv`` own arguments."""
    return Script(NOW + ADD + FROM_KEYS + CATCH + body), Script(
        NOW + ADD + FROM_ARGV.replace("F + 1", str(fixed_argv + 1)) + CATCH + body
    )


# KEYS: meta, stream, set, pointer, follows meta, follows stream[, bmeta, bstream]
# ARGV: ttl_ms, session:stream, lost, lease_ms, get_stream, follows, max_events, max_age_ms, ended_ttl_ms,
#       the pointer (stream id, 16 characters, then the tenant tag), current ('1': the session's GET
#       stream now, follows ended; '': later, by PROMOTE)
OPEN, OPEN_C = pair(
    """
if ARGV[5] == '1' and ARGV[6] == '1' and ARGV[11] == '1' then
  take_over(KEYS[5], KEYS[6], ARGV[7], ARGV[8], ARGV[1], ARGV[9])
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'seq', 0, 'end', 0)
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'lost', ARGV[3], 'until', now + tonumber(ARGV[4])) end
if ARGV[5] == '1' and ARGV[11] == '1' then
  redis.call('HSET', KEYS[1], 'bm', b_last())
  redis.call('SET', KEYS[4], ARGV[10], 'PX', ARGV[1])
elseif ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'bm', '99999999999999')  -- takes no broadcast until PROMOTE (Lua prints it whole)
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[1])
return 1
""",
    11,
)

# KEYS: meta, pointer, follows meta, follows stream[, bmeta, bstream]
# ARGV: ttl_ms, follows ('1' or ''), max_events, max_age_ms, ended_ttl_ms, the pointer.
# The GET stream opened with current '' (it took no broadcast yet) becomes the session's: the one
# it follows takes the broadcasts it missed and ends, this one takes those recorded from now on,
# the pointer names it; 0 (nothing changed) when it has ended.
PROMOTE, PROMOTE_C = pair(
    """
if redis.call('HGET', KEYS[1], 'end') ~= '0' then return 0 end
if ARGV[2] == '1' then take_over(KEYS[3], KEYS[4], ARGV[3], ARGV[4], ARGV[1], ARGV[5]) end
redis.call('HSET', KEYS[1], 'bm', b_last())
redis.call('SET', KEYS[2], ARGV[6], 'PX', ARGV[1])
return 1
""",
    6,
)

# KEYS: meta, stream, set, pointer; ARGV: data, has_data, last, max_events, max_age_ms, live_ttl_ms, ended_ttl_ms, broadcast
# ARGV[9]: the append's nonce. The meta's 'n' keeps the last 8 appends as 'nonce=seq,…': an
# append sent again after its reply was lost answers its first sequence and adds nothing.
APPEND = Script(
    NOW
    + ADD
    + """
local nonce = ARGV[9]
if nonce ~= '' then
  local seen = ',' .. (redis.call('HGET', KEYS[1], 'n') or '') .. ','
  local at = string.find(seen, ',' .. nonce .. '=', 1, true)
  if at then return tonumber(string.match(string.sub(seen, at + #nonce + 2), '^(%d+)')) end
end
if redis.call('HGET', KEYS[1], 'end') ~= '0' then return -1 end
if ARGV[8] ~= '0' then
  if tonumber(ARGV[8]) <= tonumber(redis.call('HGET', KEYS[1], 'bm') or '0') then return 0 end
  redis.call('HSET', KEYS[1], 'bm', ARGV[8])
end
local seq = add(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[4], ARGV[5])
if nonce ~= '' then
  local kept, n = {nonce .. '=' .. seq}, 1
  for item in string.gmatch(redis.call('HGET', KEYS[1], 'n') or '', '[^,]+') do
    if n >= 8 then break end
    n = n + 1
    kept[n] = item
  end
  redis.call('HSET', KEYS[1], 'n', table.concat(kept, ','))
end
local ttl = ARGV[6]
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'end', 1)
  ttl = ARGV[7]
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
if ARGV[3] ~= '1' then
  redis.call('PEXPIRE', KEYS[3], ttl)
  redis.call('PEXPIRE', KEYS[4], ttl)
end
return seq
"""
)

# KEYS: meta; ARGV: lease_ms
HOLD = Script(
    NOW
    + """
local m = redis.call('HMGET', KEYS[1], 'end', 'until')
if m[1] ~= '0' or not m[2] then return 0 end
redis.call('HSET', KEYS[1], 'until', now + tonumber(ARGV[1]))
return 1
"""
)

# KEYS: meta, stream; ARGV: ended_ttl_ms. -1: no lease (or ended); 0: ended now; else ms left
LAPSE = Script(
    NOW
    + """
local m = redis.call('HMGET', KEYS[1], 'end', 'until', 'lost')
if m[1] ~= '0' or not m[2] or not m[3] then return -1 end
local left = tonumber(m[2]) - now
if left > 0 then return left end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('XADD', KEYS[2], seq .. '-' .. now, 'd', m[3])
redis.call('HSET', KEYS[1], 'end', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 0
"""
)

# KEYS: bmeta, bstream; ARGV: data, max_events, max_age_ms
BROADCAST = Script(NOW + ADD + "return add(KEYS[1], KEYS[2], ARGV[1], '1', ARGV[2], ARGV[3])\n")

# KEYS: meta, stream[, bmeta, bstream]; ARGV: max_events, max_age_ms, live_ttl_ms
CATCH_UP, CATCH_UP_C = pair("return catch_up(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])\n", 3)

# KEYS: pointer[, bmeta, bstream]; ARGV: meta prefix, stream prefix, session id (tagged), data, max_events, max_age_ms,
#       live_ttl_ms, tenant tag. The broadcasts the stream has not taken go first (emission order kept).
TO_GET, TO_GET_C = pair(
    """
local pointer = redis.call('GET', KEYS[1])
if not pointer or string.sub(pointer, 17) ~= ARGV[8] then return 0 end
local sid = string.sub(pointer, 1, 16)
local meta, stream = ARGV[1] .. ARGV[3] .. ':' .. sid, ARGV[2] .. ARGV[3] .. ':' .. sid
if redis.call('HGET', meta, 'end') ~= '0' then return 0 end
catch_up(meta, stream, ARGV[5], ARGV[6], ARGV[7])
add(meta, stream, ARGV[4], '1', ARGV[5], ARGV[6])
redis.call('PEXPIRE', meta, ARGV[7])
redis.call('PEXPIRE', stream, ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return 1
""",
    8,
)

# KEYS: meta, stream; ARGV: ended_ttl_ms
END = Script(
    """
if redis.call('HGET', KEYS[1], 'end') ~= '0' then return 0 end
local seq = redis.call('HGET', KEYS[1], 'seq')
redis.call('HSET', KEYS[1], 'end', 1)
redis.call('XADD', KEYS[2], (tonumber(seq) + 1) .. '-0', 'x', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1
"""
)

# KEYS: set, pointer; ARGV: meta prefix, stream prefix. Ends every stream (waking readers), then forgets them.
DROP = Script(
    """
local ids = redis.call('SMEMBERS', KEYS[1])
for _, s in ipairs(ids) do
  local meta, stream = ARGV[1] .. s, ARGV[2] .. s
  local seq = redis.call('HGET', meta, 'seq')
  if seq and redis.call('HGET', meta, 'end') == '0' then
    redis.call('XADD', stream, (tonumber(seq) + 1) .. '-0', 'x', '1')
  end
  redis.call('DEL', meta)
  redis.call('PEXPIRE', stream, 2000)
end
redis.call('DEL', KEYS[1], KEYS[2])
return #ids
"""
)


# KEYS: meta, stream; ARGV: the exclusive start id, count. {seq or 0, end or 0, then id, field, value of each entry}
PAGE_OF = Script(
    """
local m = redis.call('HMGET', KEYS[1], 'seq', 'end')
local out = {m[1] or 0, m[2] or 0}
if not m[1] then return out end
for _, e in ipairs(redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', ARGV[2])) do
  out[#out + 1] = e[1]
  out[#out + 1] = e[2][1]
  out[#out + 1] = e[2][2]
end
return out
"""
)

# KEYS: bmeta, bstream; ARGV: count. {last seq or 0, then id, data of each kept broadcast}
LOG = Script(
    """
local out = {redis.call('HGET', KEYS[1], 'seq') or 0}
for _, e in ipairs(redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', ARGV[1])) do
  out[#out + 1] = e[1]
  out[#out + 1] = e[2][2]
end
return out
"""
)
