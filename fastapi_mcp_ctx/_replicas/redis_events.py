"""The events of resumable 2025 SSE streams as Redis Streams, shared by every replica.

Implements :class:`~fastapi_mcp_ctx._transport.events.EventStore`. Keys under ``<ns>``::

    <ns>ev:<session>:<stream>   STREAM  one entry per event, id ``<seq>-<ms>`` (the event's
                                        sequence, then Redis's clock when it was stored): field
                                        ``d`` = the JSON, or ``e`` = an empty (priming) event;
                                        the end marker has id ``<last seq + 1>-0``, field ``x``
    <ns>em:<session>:<stream>   HASH    seq = the last sequence, end = 0 / 1
    <ns>es:<session>            SET     the session's stream ids (for ``drop_session``)
    <ns>eg:<session>            STRING  the id of the session's GET stream (``to_get_stream``)
    <ns>eb / <ns>ebm            STREAM / HASH  the broadcast log (list changes sent to every GET
                                        stream, trimmed like a stream) and its ``seq``

A GET stream's meta also holds ``bm``, the last broadcast it took (a holder's append of a
broadcast, or :meth:`catch_up` for one nobody held: each broadcast once, in order). A call's
stream's meta holds ``lost`` (its ``call_lost`` error) and ``until`` (its producer's lease,
ms on Redis's clock, renewed by :meth:`hold`); :meth:`end_lapsed` appends ``lost`` as the last
event once ``until`` has passed (issue 24 items 4 and 5).

``append`` is one Lua script: HINCRBY the sequence, ``XADD … MAXLEN ~ <count>`` (trimming by
count), then ``XTRIM MINID`` up to the first entry younger than the age limit (trimming by
age: the ``<ms>`` part of the ids), and refreshes the keys' expiry. A live stream's keys expire
``live_seconds`` after its last event (a replica that died mid-stream leaves nothing behind for
ever); an ended stream's keys ``max_age_seconds`` after its end.

``read`` is ``XREAD`` after ``<cursor>-<max>`` (every entry of a later sequence) in one
transaction with the stream's meta; when nothing follows and ``wait`` > 0 it waits in
``XREAD BLOCK`` on a connection of its own (:meth:`RedisLink.blocking`) and reads again. So
replay and live tail are one loop on every replica: events appended on replica A reach a
client that resumed on replica B as they are written. An event is acknowledged once
``append`` returns: it is then in Redis, and survives a replica's death (and a Redis restart
when Redis persists, ``appendonly yes``).
"""

from __future__ import annotations

from typing import Any, Final, cast

import anyio
from redis.exceptions import RedisError

from .._transport.events import EventPage, StoredEvent, StreamKey, UnknownStreamError
from .link import BLOCK_SECONDS, RedisLink, Script

__all__ = ["RedisEventStore"]

_WHAT: Final = "event store"
_MAX: Final = "18446744073709551615"
_PAGE: Final = 256

_NOW = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"

# add(meta, stream, data, has_data, max_events, max_age_ms): one event, trimmed by count and age; its seq
_ADD = """
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
_CATCH = """
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
"""

# The broadcast log as catch_up reads it, with one Redis: its two keys are the script's last two.
_FROM_KEYS = """
local function b_range(bm, n)
  return redis.call('XRANGE', KEYS[#KEYS], '(' .. bm .. '-18446744073709551615', '+', 'COUNT', n)
end
local function b_last() return tonumber(redis.call('HGET', KEYS[#KEYS - 1], 'seq') or '0') end
"""

# On a cluster: ARGV after the script's own (from index F + 1) is the log as the client read it:
# id, data pairs, then the last sequence.
_FROM_ARGV = """
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


def _pair(body: str, fixed_argv: int) -> tuple[Script, Script]:
    """The script reading the broadcast log from its keys (one Redis) and its cluster twin
    reading the copy passed after its ``fixed_argv`` own arguments."""
    return Script(_NOW + _ADD + _FROM_KEYS + _CATCH + body), Script(
        _NOW + _ADD + _FROM_ARGV.replace("F + 1", str(fixed_argv + 1)) + _CATCH + body
    )


# KEYS: meta, stream, set, pointer, follows meta, follows stream[, bmeta, bstream]
# ARGV: ttl_ms, session:stream, lost, lease_ms, get_stream, follows, max_events, max_age_ms, ended_ttl_ms,
#       the pointer (stream id, 16 characters, then the tenant tag)
_OPEN, _OPEN_C = _pair(
    """
if ARGV[5] == '1' and ARGV[6] == '1' and redis.call('HGET', KEYS[5], 'end') == '0' then
  catch_up(KEYS[5], KEYS[6], ARGV[7], ARGV[8], ARGV[1])
  local seq = redis.call('HGET', KEYS[5], 'seq')
  redis.call('HSET', KEYS[5], 'end', 1)
  redis.call('XADD', KEYS[6], (tonumber(seq) + 1) .. '-0', 'x', '1')
  redis.call('PEXPIRE', KEYS[5], ARGV[9])
  redis.call('PEXPIRE', KEYS[6], ARGV[9])
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'seq', 0, 'end', 0)
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'lost', ARGV[3], 'until', now + tonumber(ARGV[4])) end
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'bm', b_last())
  redis.call('SET', KEYS[4], ARGV[10], 'PX', ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[1])
return 1
""",
    10,
)

# KEYS: meta, stream, set, pointer; ARGV: data, has_data, last, max_events, max_age_ms, live_ttl_ms, ended_ttl_ms, broadcast
_APPEND = Script(
    _NOW
    + _ADD
    + """
if redis.call('HGET', KEYS[1], 'end') ~= '0' then return -1 end
if ARGV[8] ~= '0' then
  if tonumber(ARGV[8]) <= tonumber(redis.call('HGET', KEYS[1], 'bm') or '0') then return 0 end
  redis.call('HSET', KEYS[1], 'bm', ARGV[8])
end
local seq = add(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[4], ARGV[5])
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
_HOLD = Script(
    _NOW
    + """
local m = redis.call('HMGET', KEYS[1], 'end', 'until')
if m[1] ~= '0' or not m[2] then return 0 end
redis.call('HSET', KEYS[1], 'until', now + tonumber(ARGV[1]))
return 1
"""
)

# KEYS: meta, stream; ARGV: ended_ttl_ms. -1: no lease (or ended); 0: ended now; else ms left
_LAPSE = Script(
    _NOW
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
_BROADCAST = Script(_NOW + _ADD + "return add(KEYS[1], KEYS[2], ARGV[1], '1', ARGV[2], ARGV[3])\n")

# KEYS: meta, stream[, bmeta, bstream]; ARGV: max_events, max_age_ms, live_ttl_ms
_CATCH_UP, _CATCH_UP_C = _pair("return catch_up(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])\n", 3)

# KEYS: pointer[, bmeta, bstream]; ARGV: meta prefix, stream prefix, session id (tagged), data, max_events, max_age_ms,
#       live_ttl_ms, tenant tag. The broadcasts the stream has not taken go first (emission order kept).
_TO_GET, _TO_GET_C = _pair(
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
_END = Script(
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
_DROP = Script(
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
_PAGE_OF = Script(
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
_LOG = Script(
    """
local out = {redis.call('HGET', KEYS[1], 'seq') or 0}
for _, e in ipairs(redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', ARGV[1])) do
  out[#out + 1] = e[1]
  out[#out + 1] = e[2][2]
end
return out
"""
)


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class RedisEventStore:
    """An :class:`~fastapi_mcp_ctx._transport.events.EventStore` on Redis Streams.

    Args:
        link: the Redis clients.
        max_events: events kept per stream at most (``MAXLEN ~``: Redis may keep a few more).
        max_age_seconds: events older than this are trimmed; an ended stream is forgotten this
            long after its end.
        live_seconds: a stream that gets no event for this long is forgotten (a holder that
            died); use at least the session idle time.

    Errors: every method raises :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` when
    Redis cannot be reached, besides the Protocol's :class:`UnknownStreamError`.
    """

    shared = True

    def __init__(self, link: RedisLink, *, max_events: int = 1000, max_age_seconds: float = 300.0, live_seconds: float = 3600.0) -> None:
        self.link = link
        self.max_events = max_events
        self.age_ms = _ms(max_age_seconds)
        self.live_ms = _ms(max(live_seconds, max_age_seconds))
        ns, tag = link.namespace, link.target.tag
        self._tag = tag
        self._cluster = link.target.sharded
        self._meta = f"{ns}em:"
        self._stream = f"{ns}ev:"
        self._set = f"{ns}es:"
        self._pointer = f"{ns}eg:"
        # one Redis: <ns>ebm / <ns>eb; a cluster: <ns>{eb}m / <ns>{eb}, one slot of their own
        self._bstream = f"{ns}{tag('eb')}"
        self._bmeta = f"{self._bstream}m"

    def _tail(self, key: StreamKey) -> str:
        return f"{self._tag(key.session_id)}:{key.stream_id}"

    def _keys(self, key: StreamKey) -> tuple[str, str]:
        tail = self._tail(key)
        return self._meta + tail, self._stream + tail

    async def _broadcasts(self) -> list[str | int]:
        """On a cluster, the broadcast log read from its own slot (``id, data`` pairs, then the
        last sequence), passed to the session slot's script; with one Redis, nothing (the
        script reads the log's keys itself)."""
        flat = cast("list[Any]", await self.link.eval(_WHAT, _LOG, [self._bmeta, self._bstream], [self.max_events], idempotent=True))
        return [*flat[1:], int(flat[0] or 0)]

    async def _run(self, single: Script, cluster: Script, keys: list[str], args: list[str | int], *, idempotent: bool) -> Any:
        """``single`` with the broadcast log's keys appended, or on a cluster ``cluster`` with the log's copy."""
        if self._cluster:
            return await self.link.eval(_WHAT, cluster, keys, [*args, *await self._broadcasts()], idempotent=idempotent)
        return await self.link.eval(_WHAT, single, [*keys, self._bmeta, self._bstream], args, idempotent=idempotent)

    async def open(
        self, key: StreamKey, *, lost: bytes | None = None, lease_seconds: float = 0.0, get_stream: str | None = None, follows: StreamKey | None = None
    ) -> None:
        meta, stream = self._keys(key)
        after = follows if get_stream is not None and follows is not None else key
        follows_meta, follows_stream = self._keys(after)
        await self._run(
            _OPEN,
            _OPEN_C,
            [meta, stream, self._set + self._tag(key.session_id), self._pointer + self._tag(key.session_id), follows_meta, follows_stream],
            [
                self.live_ms,
                self._tail(key),
                "" if lost is None else lost.decode(),
                _ms(lease_seconds),
                "" if get_stream is None else "1",
                "1" if after is not key else "",
                self.max_events,
                self.age_ms,
                self.age_ms,
                key.stream_id + (get_stream or ""),
            ],
            idempotent=True,  # the stream starts again empty: once or twice, the same
        )

    async def hold(self, key: StreamKey, lease_seconds: float) -> None:
        meta, _ = self._keys(key)
        await self.link.eval(_WHAT, _HOLD, [meta], [_ms(lease_seconds)], idempotent=True)

    async def end_lapsed(self, key: StreamKey) -> float | None:
        meta, stream = self._keys(key)
        left = int(await self.link.eval(_WHAT, _LAPSE, [meta, stream], [self.age_ms], idempotent=True))
        return None if left < 0 else left / 1000

    async def broadcast(self, data: bytes) -> int:
        return int(
            await self.link.eval(_WHAT, _BROADCAST, [self._bmeta, self._bstream], [data.decode(), self.max_events, self.age_ms], idempotent=False)
        )

    async def catch_up(self, key: StreamKey) -> int:
        meta, stream = self._keys(key)
        # idempotent: the stream's bm says which broadcasts it took already
        return int(await self._run(_CATCH_UP, _CATCH_UP_C, [meta, stream], [self.max_events, self.age_ms, self.live_ms], idempotent=True))

    async def to_get_stream(self, session_id: str, data: bytes, *, tenant: str) -> bool:
        done = await self._run(
            _TO_GET,
            _TO_GET_C,
            [self._pointer + self._tag(session_id)],
            [self._meta, self._stream, self._tag(session_id), data.decode(), self.max_events, self.age_ms, self.live_ms, tenant],
            idempotent=False,
        )
        return int(done) == 1

    async def append(self, key: StreamKey, data: bytes | None, *, last: bool = False, broadcast: int = 0) -> int:
        meta, stream = self._keys(key)
        seq = await self.link.eval(
            _WHAT,
            _APPEND,
            [meta, stream, self._set + self._tag(key.session_id), self._pointer + self._tag(key.session_id)],
            [
                "" if data is None else data.decode(),
                "0" if data is None else "1",
                "1" if last else "0",
                self.max_events,
                self.age_ms,
                self.live_ms,
                self.age_ms,
                broadcast,
            ],
            idempotent=bool(broadcast),  # a broadcast's copy is kept once (bm); any other event twice would repeat it
        )
        if int(seq) < 0:
            raise UnknownStreamError(key.stream_id)
        return int(seq)

    async def end(self, key: StreamKey) -> None:
        meta, stream = self._keys(key)
        await self.link.eval(_WHAT, _END, [meta, stream], [self.age_ms], idempotent=True)

    async def _snapshot(self, key: StreamKey, after: int) -> EventPage | None:
        """The page after ``after`` (None: nothing follows yet and the stream runs on)."""
        meta, stream = self._keys(key)
        flat = cast("list[Any]", await self.link.eval(_WHAT, _PAGE_OF, [meta, stream], [f"({after}-{_MAX}", _PAGE], idempotent=True))
        state = [flat[0] or None, flat[1] or None]
        found = [(None, [(flat[i], {flat[i + 1]: flat[i + 2]}) for i in range(2, len(flat), 3)])]
        seq_raw, end_raw = cast("list[str | None]", state)
        if seq_raw is None:
            raise UnknownStreamError(key.stream_id)
        last_seq, ended = int(seq_raw), end_raw == "1"
        if after > last_seq:
            raise UnknownStreamError(key.stream_id)
        events: list[StoredEvent] = []
        for _name, entries in cast("list[tuple[str, list[tuple[str, dict[str, str]]]]]", found or []):
            for entry_id, fields in entries:
                if "x" in fields:
                    continue
                data = fields.get("d")
                events.append(StoredEvent(int(entry_id.split("-", 1)[0]), None if data is None else data.encode()))
        reaches_end = not events or events[-1].seq == last_seq
        if not events and not ended:
            return None
        return EventPage(tuple(events), ended and reaches_end)

    async def read(self, key: StreamKey, after: int, *, wait: float = 0.0) -> EventPage:
        page = await self._snapshot(key, after)
        if page is not None or wait <= 0:
            return page or EventPage((), False)
        _, stream = self._keys(key)
        deadline = anyio.current_time() + wait
        while True:
            left = deadline - anyio.current_time()
            if left <= 0:
                return EventPage((), False)
            c = self.link.blocking()
            try:
                await c.exec("XREAD", "COUNT", 1, "BLOCK", _ms(min(left, BLOCK_SECONDS)), "STREAMS", stream, f"{after}-{_MAX}")
            except (RedisError, OSError) as exc:
                raise self.link.unavailable(exc, _WHAT) from exc
            page = await self._snapshot(key, after)
            if page is not None:
                return page

    async def drop_session(self, session_id: str) -> None:
        tagged = self._tag(session_id)
        await self.link.eval(_WHAT, _DROP, [self._set + tagged, self._pointer + tagged], [self._meta, self._stream], idempotent=True)

    async def ping(self) -> None:
        """Raise :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` when Redis is unreachable
        (on a cluster: when no master answers)."""
        await self.link.ping()
