"""The Lua scripts of the Redis session store and its leases (:mod:`.redis_sessions`): on one
Redis each compound step is one script; on a cluster the steps that touched a session's keys
and the counting sets at once are split into scripts of one slot each."""

from __future__ import annotations

from ..backends._redis_client import Script

__all__ = ["ACQUIRE", "BUMP", "CREATE", "CREATE_ONE", "DELETE", "DELETE_ONE", "GET", "GET_ONE", "NOTE", "NOW", "RELEASE", "RENEW", "RENEW_ONE", "RESERVE", "TOUCH", "UPDATE"]

NOW = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"

# KEYS: rec, all, own; ARGV: json, owner, idle_ms, max, max_owner ('' none), id
CREATE = Script(
    NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return -1 end
if ARGV[2] ~= '' and ARGV[5] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then return -2 end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return -3 end
redis.call('HSET', KEYS[1], 'r', ARGV[1], 'o', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local exp = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], exp, ARGV[6])
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[3], exp, ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return now
"""
)

# The idle refresh of a live record: locals rec, all, idle (ms), id, ownp (owner key prefix).
TOUCH = (
    NOW
    + """
local owner = redis.call('HGET', rec, 'o')
redis.call('PEXPIRE', rec, idle)
local exp = now + tonumber(idle)
redis.call('ZADD', all, 'XX', exp, id)
if owner and owner ~= '' then
  redis.call('ZADD', ownp .. owner, 'XX', exp, id)
  redis.call('PEXPIRE', ownp .. owner, idle)
end
"""
)

# The lookups of one batch (autopipe.KeyBatcher). KEYS[1]: all; KEYS[2..]: the records;
# ARGV: idle_ms, slack_ms, own prefix, length of the record keys' prefix. One answer per record:
# its JSON, or 0 when unknown. Writes (the refresh) only when a record's expiry is more than
# slack_ms old: most lookups are pure reads (no AOF write, no fsync).
GET = Script(
    """
local all, idle, ownp, cut = KEYS[1], ARGV[1], ARGV[3], tonumber(ARGV[4]) + 1
local fresh = tonumber(idle) - tonumber(ARGV[2])
local out = {}
for i = 2, #KEYS do
  local rec = KEYS[i]
  local r = redis.call('HGET', rec, 'r')
  if not r then
    out[i - 1] = 0
  else
    out[i - 1] = r
    if redis.call('PTTL', rec) < fresh then
      local id = string.sub(rec, cut)
"""
    + TOUCH
    + """    end
  end
end
return out
"""
)

UPDATE = Script(
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[1])
return 1
"""
)

# KEYS: rec, all, lease; ARGV: id, own prefix
DELETE = Script(
    """
local owner = redis.call('HGET', KEYS[1], 'o')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
if not owner then return 0 end
if owner ~= '' then redis.call('ZREM', ARGV[2] .. owner, ARGV[1]) end
redis.call('DEL', KEYS[1])
return 1
"""
)

# KEYS: lease, rec; ARGV: token, lease_ms, force ('1': a resume takes the stream over)
ACQUIRE = Script(
    """
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
if ARGV[3] == '1' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0
"""
)

# KEYS: lease, rec, all; ARGV: token, lease_ms, idle_ms, id, own prefix
RENEW = Script(
    """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local rec, all, idle, id, ownp = KEYS[2], KEYS[3], ARGV[3], ARGV[4], ARGV[5]
"""
    + TOUCH
    + "return 1\n"
)

RELEASE = Script(
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
)

NOTE = Script(
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HSET', KEYS[1], ARGV[1], '1')
"""
)


# On a cluster (hash tags: a session's record and lease on one slot, each counting set on its
# own) the steps that touched the record and the counting sets at once are split: the counting
# sets are reserved first (RESERVE, one per set), the record written after (CREATE_ONE), and
# a reservation is taken back when a later step refuses. A lookup or a renewal refreshes the
# record on its slot and, when it did, the counting sets after it (BUMP: best effort; an entry
# not refreshed only lets the cap count a live session as gone once its old expiry passed).

# KEYS: set; ARGV: max ('' none), idle_ms, id, expire the set ('1' / ''). Returns now, or -1 when full.
RESERVE = Script(
    NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[1] ~= '' and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return -1 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
if ARGV[4] == '1' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return now
"""
)

# KEYS: rec; ARGV: json, owner, idle_ms
CREATE_ONE = Script(
    """
if redis.call('EXISTS', KEYS[1]) == 1 then return -3 end
redis.call('HSET', KEYS[1], 'r', ARGV[1], 'o', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
)

# KEYS: rec; ARGV: idle_ms, slack_ms. {json or 0, owner, now when refreshed else 0}
GET_ONE = Script(
    """
local r = redis.call('HGET', KEYS[1], 'r')
if not r then return {0, '', 0} end
if redis.call('PTTL', KEYS[1]) >= tonumber(ARGV[1]) - tonumber(ARGV[2]) then return {r, '', 0} end
local t = redis.call('TIME')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {r, redis.call('HGET', KEYS[1], 'o') or '', t[1] * 1000 + math.floor(t[2] / 1000)}
"""
)

# KEYS: set; ARGV: score, id, idle_ms, expire the set ('1' / '')
BUMP = Script(
    """
redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[2])
if ARGV[4] == '1' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
"""
)

# KEYS: rec, lease. {1, owner} when the record was there, else 0
DELETE_ONE = Script(
    """
local owner = redis.call('HGET', KEYS[1], 'o')
redis.call('DEL', KEYS[2])
if not owner then return 0 end
redis.call('DEL', KEYS[1])
return {1, owner}
"""
)

# KEYS: lease, rec; ARGV: token, lease_ms, idle_ms. {1, owner, now} or 0 when the lease was lost
RENEW_ONE = Script(
    """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local t = redis.call('TIME')
return {1, redis.call('HGET', KEYS[2], 'o') or '', t[1] * 1000 + math.floor(t[2] / 1000)}
"""
)
