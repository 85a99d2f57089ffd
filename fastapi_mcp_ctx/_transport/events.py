"""Where the events of resumable 2025 SSE streams are kept: the :class:`EventStore` Protocol
(its in-process twin: ``memory_events.py``; the ids they are kept under: ``event_ids.py``).

Spec 2025-11-25 ``basic/transports`` §Resumability and Redelivery; known faults B15, B16.

- A stream is an append-only log of encoded JSON-RPC messages (``None``: an empty event, the
  priming event) that ends once (the final response of a request, or the end of a GET
  stream). Readers tail it by sequence (:meth:`EventStore.read` waits for the next event like
  Redis ``XREAD BLOCK``), so replay and live delivery are the same loop and nothing is lost
  or sent twice between them.
- Retention is bounded by count (events per stream) and age (seconds); what is trimmed is
  gone, a reader past a gap continues with the oldest event kept. An ended stream is
  forgotten once its last event is older than the age limit.
- Streams that outlive their producer (issue 24): a call's stream may be opened with its
  ``lost`` event and a producer lease (:meth:`EventStore.hold`); once the lease lapses any
  reader ends the stream with it (:meth:`EventStore.end_lapsed`). A GET stream is the
  session's (``get_stream``): messages to the session go into it (:meth:`EventStore.to_get_stream`),
  and list changes recorded in the broadcast log (under the same retention bounds) are taken
  by each GET stream once, from its holder or, for one whose holder died, on its resume
  (:meth:`EventStore.catch_up`).

DESIGN.md decision 9: a Redis Streams implementation (one stream key per SSE stream,
trimmed by ``MAXLEN``) satisfies the same Protocol so several replicas share resumption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .event_ids import StreamKey, format_event_id, new_stream_id, parse_event_id

# StreamKey and the event id codec live in event_ids.py; they stay importable from here, where
# they were defined before.
__all__ = [
    "EventPage",
    "EventStore",
    "StoredEvent",
    "StreamKey",
    "UnknownStreamError",
    "format_event_id",
    "new_stream_id",
    "parse_event_id",
]

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
        """Start an empty stream (its first event gets sequence 1).

        Args:
            lost: a call's stream: the final event written in its place (:meth:`end_lapsed`)
                when its producer stops renewing its lease (:meth:`hold`) before it ends:
                the call's JSON-RPC error ``call_lost``.
            lease_seconds: with ``lost``: the producer's first lease.
            get_stream: the session's GET stream from now on, of this tenant tag: what
                :meth:`to_get_stream` records for the tag goes into it, and it takes the
                broadcasts recorded after this moment.
            follows: with ``get_stream``: the GET stream it continues (a dead replica's):
                that one takes the broadcasts it missed, then ends, in the same step, so
                nothing recorded meanwhile falls between the two.
            current: with ``get_stream``: False opens it without making it the session's GET
                stream yet (``follows`` is ignored): :meth:`promote` does, once nothing else
                can fail, so an opening that fails half-way leaves the session's stream as it was.
        """
        ...

    async def promote(self, key: StreamKey, *, get_stream: str, follows: StreamKey | None = None) -> bool:
        """Make ``key`` (opened with ``get_stream`` and ``current=False``) the session's GET
        stream; ``follows`` takes the broadcasts it missed and ends, in the same step.

        Returns:
            False when ``key`` has ended meanwhile (nothing changed).
        """
        ...

    async def hold(self, key: StreamKey, lease_seconds: float) -> None:
        """The producer of a call's stream is alive: its lease runs ``lease_seconds`` from now
        (a no-op for an ended or unknown stream, or one opened without ``lost``)."""
        ...

    async def end_lapsed(self, key: StreamKey) -> float | None:
        """End a call's stream whose producer's lease lapsed, with its ``lost`` event (atomic:
        once, whoever asks; an append after it raises ``UnknownStreamError``).

        Returns:
            0.0 when it ended the stream now; else the seconds left before the lease lapses;
            None when the stream has no producer lease (a GET stream, ended, or unknown).
        """
        ...

    async def broadcast(self, data: bytes) -> int:
        """Record one message sent to every session's GET stream (a list change), for the GET
        streams nobody holds (:meth:`catch_up`); kept under the stream retention bounds.

        Returns:
            Its sequence in the broadcast log (from 1); the holders append it with it.
        """
        ...

    async def catch_up(self, key: StreamKey) -> int:
        """Append to GET stream ``key`` the recorded broadcasts it has not taken yet (still kept).

        Returns:
            How many were appended (0 for an ended or unknown stream).
        """
        ...

    async def to_get_stream(self, session_id: str, data: bytes, *, tenant: str) -> bool:
        """Append one event to the session's GET stream (the last opened with ``get_stream``),
        whoever holds it: every message to the session, with several replicas.

        Returns:
            False when the session has no GET stream that runs on, or it was opened for
            another tenant tag than ``tenant`` (another tenant's session id finds nothing, B16).
        """
        ...

    async def append(self, key: StreamKey, data: bytes | None, *, last: bool = False, broadcast: int = 0) -> int:
        """Store one event (``data`` None: an empty event); ``last`` also ends the stream.

        Args:
            broadcast: the message's sequence in the broadcast log (0: not a broadcast): stored
                only when the stream has not taken it already (:meth:`catch_up`).
        Returns:
            The event's sequence; 0 when a broadcast was not stored (taken already).
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
