"""The in-process :class:`~fastapi_mcp_ctx._transport.events.EventStore`: one replica's
resumable 2025 SSE streams, with the retention, broadcast and lease rules the Protocol states
(spec 2025-11-25 ``basic/transports`` §Resumability and Redelivery). Several replicas share a
Redis one instead (``_replicas.redis_events``)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import anyio

from .event_ids import StreamKey
from .events import EventPage, StoredEvent, UnknownStreamError

__all__ = ["MemoryEventStore"]

_PAGE: Final = 256
_NO_BROADCAST_YET: Final = 10**14 - 1
"""The broadcast mark of a GET stream opened with ``current=False``: it takes none until promoted."""


@dataclass(slots=True)
class _Log:
    touched: float
    events: deque[tuple[int, float, bytes | None]] = field(default_factory=lambda: deque())
    last_seq: int = 0
    ended: bool = False
    changed: anyio.Event | None = None
    lost: bytes | None = None  # a call's stream: its final event should its producer's lease lapse
    until: float = 0.0  # when that lease lapses (the store's clock)
    mark: int = 0  # the last broadcast this GET stream took

    def wake(self) -> None:
        if self.changed is not None:
            self.changed.set()
            self.changed = None


class MemoryEventStore:
    """In-process :class:`EventStore`.

    Args:
        max_events: events kept per stream at most (the oldest go first).
        max_age_seconds: events older than this many seconds are dropped; an ended stream is
            forgotten this long after its last event.
        max_streams: streams kept at most; beyond, the ended streams touched longest ago go first.
        clock: time source in seconds (tests inject one).
    """

    def __init__(
        self,
        *,
        max_events: int = 1000,
        max_age_seconds: float = 300.0,
        max_streams: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_events = max_events
        self._max_age = max_age_seconds
        self._max_streams = max_streams
        self._clock = clock
        self._sessions: dict[str, dict[str, _Log]] = {}
        self._count = 0
        self._swept = clock()
        self._broadcasts: deque[tuple[int, float, bytes]] = deque()
        self._broadcast_seq = 0
        self._get_streams: dict[str, tuple[str, str]] = {}  # session id -> its GET stream's id, tenant tag

    def __len__(self) -> int:
        """How many streams are kept."""
        return self._count

    def _log(self, key: StreamKey) -> _Log:
        log = self._sessions.get(key.session_id, {}).get(key.stream_id)
        if log is None:
            raise UnknownStreamError(key.stream_id)
        return log

    def _trim(self, log: _Log, now: float) -> None:
        events = log.events
        while events and (len(events) > self._max_events or now - events[0][1] > self._max_age):
            events.popleft()

    def _forget(self, session_id: str, stream_id: str) -> None:
        streams = self._sessions.get(session_id)
        if streams is not None and streams.pop(stream_id, None) is not None:
            self._count -= 1
            if self._get_streams.get(session_id, ("",))[0] == stream_id:
                del self._get_streams[session_id]
            if not streams:
                del self._sessions[session_id]

    def _sweep(self, now: float) -> None:
        self._swept = now
        stale = [
            (sid, stream_id)
            for sid, streams in self._sessions.items()
            for stream_id, log in streams.items()
            if log.ended and now - log.touched > self._max_age
        ]
        for sid, stream_id in stale:
            self._forget(sid, stream_id)
        if self._count >= self._max_streams:
            ended = sorted(
                ((log.touched, sid, stream_id) for sid, streams in self._sessions.items() for stream_id, log in streams.items() if log.ended),
            )
            for _, sid, stream_id in ended[: self._count - self._max_streams + 1]:
                self._forget(sid, stream_id)

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
        now = self._clock()
        if self._count >= self._max_streams or now - self._swept > self._max_age / 10:
            self._sweep(now)
        if get_stream is not None and follows is not None and current:
            await self.catch_up(follows)
            await self.end(follows)
        streams = self._sessions.setdefault(key.session_id, {})
        if key.stream_id not in streams:
            self._count += 1
        log = streams[key.stream_id] = _Log(touched=now, lost=lost, until=now + lease_seconds)
        if get_stream is not None:
            log.mark = self._broadcast_seq if current else _NO_BROADCAST_YET
            if current:
                self._get_streams[key.session_id] = (key.stream_id, get_stream)

    async def promote(self, key: StreamKey, *, get_stream: str, follows: StreamKey | None = None) -> bool:
        log = self._sessions.get(key.session_id, {}).get(key.stream_id)
        if log is None or log.ended:
            return False
        if follows is not None:
            await self.catch_up(follows)
            await self.end(follows)
        log.mark = self._broadcast_seq
        self._get_streams[key.session_id] = (key.stream_id, get_stream)
        return True

    async def hold(self, key: StreamKey, lease_seconds: float) -> None:
        log = self._sessions.get(key.session_id, {}).get(key.stream_id)
        if log is not None and not log.ended and log.lost is not None:
            log.until = self._clock() + lease_seconds

    async def end_lapsed(self, key: StreamKey) -> float | None:
        log = self._sessions.get(key.session_id, {}).get(key.stream_id)
        if log is None or log.ended or log.lost is None:
            return None
        left = log.until - self._clock()
        if left > 0:
            return left
        await self.append(key, log.lost, last=True)
        return 0.0

    async def broadcast(self, data: bytes) -> int:
        now = self._clock()
        self._broadcast_seq += 1
        kept = self._broadcasts
        kept.append((self._broadcast_seq, now, data))
        while kept and (len(kept) > self._max_events or now - kept[0][1] > self._max_age):
            kept.popleft()
        return self._broadcast_seq

    async def catch_up(self, key: StreamKey) -> int:
        log = self._sessions.get(key.session_id, {}).get(key.stream_id)
        if log is None or log.ended:
            return 0
        now = self._clock()
        missed = [(seq, data) for seq, at, data in self._broadcasts if seq > log.mark and now - at <= self._max_age]
        for seq, data in missed:
            await self.append(key, data, broadcast=seq)
        log.mark = max(log.mark, self._broadcast_seq)
        return len(missed)

    async def to_get_stream(self, session_id: str, data: bytes, *, tenant: str) -> bool:
        stream_id, tag = self._get_streams.get(session_id, ("", ""))
        log = self._sessions.get(session_id, {}).get(stream_id)
        if log is None or log.ended or tag != tenant:
            return False
        key = StreamKey(session_id, stream_id)
        await self.catch_up(key)  # the broadcasts it has not taken go first: emission order kept
        await self.append(key, data)
        return True

    async def append(self, key: StreamKey, data: bytes | None, *, last: bool = False, broadcast: int = 0) -> int:
        log = self._log(key)
        if log.ended:
            raise UnknownStreamError(key.stream_id)
        if broadcast:
            if broadcast <= log.mark:
                return 0
            log.mark = broadcast
        now = self._clock()
        log.last_seq += 1
        log.events.append((log.last_seq, now, data))
        log.touched = now
        log.ended = last
        self._trim(log, now)
        log.wake()
        return log.last_seq

    async def end(self, key: StreamKey) -> None:
        try:
            log = self._log(key)
        except UnknownStreamError:
            return
        if not log.ended:
            log.ended = True
            log.touched = self._clock()
            log.wake()

    async def read(self, key: StreamKey, after: int, *, wait: float = 0.0) -> EventPage:
        log = self._log(key)
        if after > log.last_seq:
            raise UnknownStreamError(key.stream_id)
        if after == log.last_seq and not log.ended and wait > 0:
            if log.changed is None:
                log.changed = anyio.Event()
            changed = log.changed
            with anyio.move_on_after(wait):
                await changed.wait()
            log = self._log(key)
        self._trim(log, self._clock())
        page = tuple(StoredEvent(seq, data) for seq, _, data in log.events if seq > after)[:_PAGE]
        reaches_end = not page or page[-1].seq == log.last_seq
        return EventPage(page, log.ended and reaches_end)

    async def drop_session(self, session_id: str) -> None:
        streams = self._sessions.pop(session_id, None)
        self._get_streams.pop(session_id, None)
        if streams is not None:
            self._count -= len(streams)
            for log in streams.values():
                log.ended = True
                log.wake()
