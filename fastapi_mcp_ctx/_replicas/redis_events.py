"""The events of resumable 2025 SSE streams as Redis Streams, shared by every replica.

Implements :class:`~fastapi_mcp_ctx._transport.events.EventStore`. Keys under ``<ns>``::

    <ns>ev:<session>:<stream>   STREAM  one entry per event, id ``<seq>-<ms>`` (the event's
                                        sequence, then Redis's clock when it was stored): field
                                        ``d`` = the JSON, or ``e`` = an empty (priming) event;
                                        the end marker has id ``<last seq + 1>-0``, field ``x``
    <ns>em:<session>:<stream>   HASH    seq = the last sequence, end = 0 / 1
    <ns>es:<session>            SET     the session's stream ids (for ``drop_session``)

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

# KEYS: meta, stream, set; ARGV: ttl_ms, stream id
_OPEN = Script(
    """
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'seq', 0, 'end', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[1])
return 1
"""
)

# KEYS: meta, stream, set; ARGV: data, has_data, last, max_events, max_age_ms, live_ttl_ms, ended_ttl_ms
_APPEND = Script(
    """
if redis.call('HGET', KEYS[1], 'end') ~= '0' then return -1 end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if ARGV[2] == '1' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], seq .. '-' .. now, 'd', ARGV[1])
else
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], seq .. '-' .. now, 'e', '')
end
local cutoff = now - tonumber(ARGV[5])
local function stamp(id) return tonumber(string.sub(id, string.find(id, '-') + 1)) end
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
if #first > 0 and stamp(first[1][1]) < cutoff then
  local start = '-'
  while true do
    local batch = redis.call('XRANGE', KEYS[2], start, '+', 'COUNT', 64)
    local keep = nil
    for _, e in ipairs(batch) do
      if stamp(e[1]) >= cutoff then keep = e[1] break end
    end
    if keep then redis.call('XTRIM', KEYS[2], 'MINID', keep) break end
    if #batch == 0 then break end
    start = '(' .. batch[#batch][1]
  end
end
local ttl = ARGV[6]
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'end', 1)
  ttl = ARGV[7]
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
if ARGV[3] ~= '1' then redis.call('PEXPIRE', KEYS[3], ttl) end
return seq
"""
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

# KEYS: set; ARGV: meta prefix, stream prefix. Ends every stream (waking readers), then forgets them.
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
redis.call('DEL', KEYS[1])
return #ids
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
        ns = link.namespace
        self._meta = f"{ns}em:"
        self._stream = f"{ns}ev:"
        self._set = f"{ns}es:"

    def _keys(self, key: StreamKey) -> tuple[str, str]:
        tail = f"{key.session_id}:{key.stream_id}"
        return self._meta + tail, self._stream + tail

    async def open(self, key: StreamKey) -> None:
        meta, stream = self._keys(key)
        await self.link.eval(_WHAT, _OPEN, [meta, stream, self._set + key.session_id], [self.live_ms, f"{key.session_id}:{key.stream_id}"])

    async def append(self, key: StreamKey, data: bytes | None, *, last: bool = False) -> int:
        meta, stream = self._keys(key)
        seq = await self.link.eval(
            _WHAT,
            _APPEND,
            [meta, stream, self._set + key.session_id],
            [
                "" if data is None else data.decode(),
                "0" if data is None else "1",
                "1" if last else "0",
                self.max_events,
                self.age_ms,
                self.live_ms,
                self.age_ms,
            ],
        )
        if int(seq) < 0:
            raise UnknownStreamError(key.stream_id)
        return int(seq)

    async def end(self, key: StreamKey) -> None:
        meta, stream = self._keys(key)
        await self.link.eval(_WHAT, _END, [meta, stream], [self.age_ms])

    async def _snapshot(self, key: StreamKey, after: int) -> EventPage | None:
        """The page after ``after`` (None: nothing follows yet and the stream runs on)."""
        meta, stream = self._keys(key)
        c = self.link.commands()
        async with c.slots:
            try:
                pipe: Any = c.redis.pipeline(transaction=True)
                pipe.hmget(meta, "seq", "end")
                pipe.xread({stream: f"{after}-{_MAX}"}, count=_PAGE)
                state, found = await pipe.execute()
            except (RedisError, OSError) as exc:
                raise self.link.unavailable(exc, _WHAT) from exc
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
        await self.link.eval(_WHAT, _DROP, [self._set + session_id], [self._meta, self._stream])

    async def ping(self) -> None:
        """Raise :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` when Redis is unreachable."""
        await self.link.call(_WHAT, "PING")
