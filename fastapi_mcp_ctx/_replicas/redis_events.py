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

A GET stream's meta also holds ``bm``, the last broadcast it took (:meth:`catch_up`, by its
holder's pump or on a resume: each broadcast once, in order; a stream not yet promoted holds a
mark above any sequence, so it takes none until :meth:`promote`). A call's
stream's meta holds ``lost`` (its ``call_lost`` error) and ``until`` (its producer's lease,
ms on Redis's clock, renewed by :meth:`hold`); :meth:`end_lapsed` appends ``lost`` as the last
event once ``until`` has passed (issue 24 items 4 and 5).

``append`` is one Lua script, safe to send twice (its nonce: the meta's ``n`` holds the last 8
appends' nonces and sequences, so a retry after a lost reply answers the first sequence): HINCRBY the sequence, ``XADD … MAXLEN ~ <count>`` (trimming by
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

import secrets
from typing import Any, Final, cast

import anyio

from .._transport.event_ids import StreamKey
from .._transport.events import EventPage, StoredEvent, UnknownStreamError
from ..backends._redis_client import FAILURES
from . import event_scripts as lua
from .link import BLOCK_SECONDS, RedisLink, Script

__all__ = ["RedisEventStore"]

_WHAT: Final = "event store"
_MAX: Final = "18446744073709551615"
_PAGE: Final = 256

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
        flat = cast("list[Any]", await self.link.eval(_WHAT, lua.LOG, [self._bmeta, self._bstream], [self.max_events], idempotent=True))
        return [*flat[1:], int(flat[0] or 0)]

    async def _run(self, single: Script, cluster: Script, keys: list[str], args: list[str | int], *, idempotent: bool) -> Any:
        """``single`` with the broadcast log's keys appended, or on a cluster ``cluster`` with the log's copy."""
        if self._cluster:
            return await self.link.eval(_WHAT, cluster, keys, [*args, *await self._broadcasts()], idempotent=idempotent)
        return await self.link.eval(_WHAT, single, [*keys, self._bmeta, self._bstream], args, idempotent=idempotent)

    async def open(
        self,
        key: StreamKey,
        *,
        lost: bytes | None = None,
        lease_seconds: float = 0.0,
        get_stream: str | None = None,
        follows: StreamKey | None = None,
        current: bool = True,
    ) -> None:
        meta, stream = self._keys(key)
        after = follows if get_stream is not None and follows is not None else key
        follows_meta, follows_stream = self._keys(after)
        await self._run(
            lua.OPEN,
            lua.OPEN_C,
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
                "1" if current else "",
            ],
            idempotent=True,  # the stream starts again empty: once or twice, the same
        )

    async def promote(self, key: StreamKey, *, get_stream: str, follows: StreamKey | None = None) -> bool:
        meta, _ = self._keys(key)
        follows_meta, follows_stream = self._keys(follows or key)
        done = await self._run(
            lua.PROMOTE,
            lua.PROMOTE_C,
            [meta, self._pointer + self._tag(key.session_id), follows_meta, follows_stream],
            [self.live_ms, "1" if follows is not None else "", self.max_events, self.age_ms, self.age_ms, key.stream_id + get_stream],
            idempotent=True,  # the same stream made current twice: the same
        )
        return int(done) == 1

    async def hold(self, key: StreamKey, lease_seconds: float) -> None:
        meta, _ = self._keys(key)
        await self.link.eval(_WHAT, lua.HOLD, [meta], [_ms(lease_seconds)], idempotent=True)

    async def end_lapsed(self, key: StreamKey) -> float | None:
        meta, stream = self._keys(key)
        left = int(await self.link.eval(_WHAT, lua.LAPSE, [meta, stream], [self.age_ms], idempotent=True))
        return None if left < 0 else left / 1000

    async def broadcast(self, data: bytes) -> int:
        return int(
            await self.link.eval(_WHAT, lua.BROADCAST, [self._bmeta, self._bstream], [data.decode(), self.max_events, self.age_ms], idempotent=False)
        )

    async def catch_up(self, key: StreamKey) -> int:
        meta, stream = self._keys(key)
        # idempotent: the stream's bm says which broadcasts it took already
        return int(await self._run(lua.CATCH_UP, lua.CATCH_UP_C, [meta, stream], [self.max_events, self.age_ms, self.live_ms], idempotent=True))

    async def to_get_stream(self, session_id: str, data: bytes, *, tenant: str) -> bool:
        done = await self._run(
            lua.TO_GET,
            lua.TO_GET_C,
            [self._pointer + self._tag(session_id)],
            [self._meta, self._stream, self._tag(session_id), data.decode(), self.max_events, self.age_ms, self.live_ms, tenant],
            idempotent=False,
        )
        return int(done) == 1

    async def append(self, key: StreamKey, data: bytes | None, *, last: bool = False, broadcast: int = 0) -> int:
        meta, stream = self._keys(key)
        seq = await self.link.eval(
            _WHAT,
            lua.APPEND,
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
                "" if broadcast else secrets.token_hex(8),
            ],
            idempotent=True,  # sent again once, it finds its nonce (or a broadcast its bm): stored once
        )
        if int(seq) < 0:
            raise UnknownStreamError(key.stream_id)
        return int(seq)

    async def end(self, key: StreamKey) -> None:
        meta, stream = self._keys(key)
        await self.link.eval(_WHAT, lua.END, [meta, stream], [self.age_ms], idempotent=True)

    async def _snapshot(self, key: StreamKey, after: int) -> EventPage | None:
        """The page after ``after`` (None: nothing follows yet and the stream runs on)."""
        meta, stream = self._keys(key)
        flat = cast("list[Any]", await self.link.eval(_WHAT, lua.PAGE_OF, [meta, stream], [f"({after}-{_MAX}", _PAGE], idempotent=True))
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
            except FAILURES as exc:
                raise self.link.unavailable(exc, _WHAT) from exc
            page = await self._snapshot(key, after)
            if page is not None:
                return page

    async def drop_session(self, session_id: str) -> None:
        tagged = self._tag(session_id)
        await self.link.eval(_WHAT, lua.DROP, [self._set + tagged, self._pointer + tagged], [self._meta, self._stream], idempotent=True)

    async def ping(self) -> None:
        """Raise :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` when Redis is unreachable
        (on a cluster: when no master answers)."""
        await self.link.ping()
