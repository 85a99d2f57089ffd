"""Where the events of resumable 2025 SSE streams are kept: the event id codec, the
:class:`EventStore` Protocol and its in-process twin :class:`MemoryEventStore`.

Spec 2025-11-25 ``basic/transports`` §Resumability and Redelivery; known faults B15, B16.

- An event id names its stream and its place in it: ``<stream id>:<sequence>``, the stream id
  16 lowercase hex characters (random, made per stream), the sequence a per-stream counter
  from 1. Ids are unique across every stream of a session, and a ``Last-Event-ID`` leads to
  exactly one stream. :func:`parse_event_id` accepts nothing else (``InvalidEventIdError``).
- Streams are keyed by session **and** stream id (:class:`StreamKey`): an id taken from
  another session (of the same or another tenant) finds nothing, exactly like an id that was
  never issued, so there is no existence oracle (B16). Sessions are bound to their principal
  before any lookup happens.
- A stream is an append-only log of encoded JSON-RPC messages (``None``: an empty event, the
  priming event) that ends once (the final response of a request, or the end of a GET
  stream). Readers tail it by sequence (:meth:`EventStore.read` waits for the next event like
  Redis ``XREAD BLOCK``), so replay and live delivery are the same loop and nothing is lost
  or sent twice between them.
- Retention is bounded by count (events per stream) and age (seconds); what is trimmed is
  gone, a reader past a gap continues with the oldest event kept. An ended stream is
  forgotten once its last event is older than the age limit.

DESIGN.md decision 9: a Redis Streams implementation (one stream key per SSE stream,
trimmed by ``MAXLEN``) satisfies the same Protocol so several replicas share resumption.
"""

from __future__ import annotations

import re
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

import anyio

from ..errors import InvalidEventIdError

__all__ = [
    "EventPage",
    "EventStore",
    "MemoryEventStore",
    "StoredEvent",
    "StreamKey",
    "UnknownStreamError",
    "format_event_id",
    "new_stream_id",
    "parse_event_id",
]

_EVENT_ID: Final = re.compile(r"([0-9a-f]{16}):(0|[1-9][0-9]{0,17})")
_PAGE: Final = 256


def new_stream_id() -> str:
    """A fresh stream id: 16 lowercase hex characters from ``secrets`` (64 bits)."""
    return secrets.token_hex(8)


def format_event_id(stream_id: str, seq: int) -> str:
    """``<stream id>:<seq>``, the SSE ``id`` of event ``seq`` of stream ``stream_id``."""
    return f"{stream_id}:{seq}"


def parse_event_id(raw: str) -> tuple[str, int]:
    """The (stream id, sequence) named by a ``Last-Event-ID`` header value.

    Raises:
        InvalidEventIdError: anything but ``<16 lowercase hex>:<decimal>`` (-32600, HTTP 400).
    """
    match = _EVENT_ID.fullmatch(raw.strip())
    if match is None:
        raise InvalidEventIdError()
    return match.group(1), int(match.group(2))


@dataclass(frozen=True, slots=True)
class StreamKey:
    """One SSE stream: the session it belongs to and its own id."""

    session_id: str
    stream_id: str

    def event_id(self, seq: int) -> str:
        """The SSE ``id`` of event ``seq`` of this stream."""
        return format_event_id(self.stream_id, seq)


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One stored event: its sequence and its ``data`` (compact JSON bytes; None: empty data)."""

    seq: int
    data: bytes | None


@dataclass(frozen=True, slots=True)
class EventPage:
    """What :meth:`EventStore.read` found after a cursor.

    Attributes:
        events: kept events after the cursor, oldest first (at most a page).
        ended: the stream has ended and ``events`` reaches its last event: nothing follows.
    """

    events: tuple[StoredEvent, ...]
    ended: bool


class UnknownStreamError(LookupError):
    """No such stream in this session (never made, forgotten, or another session's), or a
    cursor beyond its last event. The router answers it as an unknown ``Last-Event-ID``."""


class EventStore(Protocol):
    """The events of resumable SSE streams. Implementations must be safe under concurrency
    (several connections of one process, and later several replicas, share one store)."""

    async def open(self, key: StreamKey) -> None:
        """Start an empty stream (its first event gets sequence 1)."""
        ...

    async def append(self, key: StreamKey, data: bytes | None, *, last: bool = False) -> int:
        """Store one event (``data`` None: an empty event); ``last`` also ends the stream.

        Returns:
            The event's sequence.
        Raises:
            UnknownStreamError: the stream is unknown or has ended.
        """
        ...

    async def end(self, key: StreamKey) -> None:
        """End the stream without a further event (a no-op when unknown or ended)."""
        ...

    async def read(self, key: StreamKey, after: int, *, wait: float = 0.0) -> EventPage:
        """The kept events with a sequence above ``after``, oldest first.

        Args:
            after: the cursor (0: from the first kept event).
            wait: when nothing follows the cursor yet, wait up to this many seconds for the
                next event or the end.
        Raises:
            UnknownStreamError: the stream is unknown, or ``after`` is beyond its last event.
        """
        ...

    async def drop_session(self, session_id: str) -> None:
        """Forget every stream of an ended session."""
        ...


@dataclass(slots=True)
class _Log:
    touched: float
    events: deque[tuple[int, float, bytes | None]] = field(default_factory=lambda: deque())
    last_seq: int = 0
    ended: bool = False
    changed: anyio.Event | None = None

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

    async def open(self, key: StreamKey) -> None:
        now = self._clock()
        if self._count >= self._max_streams or now - self._swept > self._max_age / 10:
            self._sweep(now)
        streams = self._sessions.setdefault(key.session_id, {})
        if key.stream_id not in streams:
            self._count += 1
        streams[key.stream_id] = _Log(touched=now)

    async def append(self, key: StreamKey, data: bytes | None, *, last: bool = False) -> int:
        log = self._log(key)
        if log.ended:
            raise UnknownStreamError(key.stream_id)
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
        if streams is not None:
            self._count -= len(streams)
            for log in streams.values():
                log.ended = True
                log.wake()
