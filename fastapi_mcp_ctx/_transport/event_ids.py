"""The ids of resumable 2025 SSE streams and their events: the event id codec and :class:`StreamKey`.

Spec 2025-11-25 ``basic/transports`` §Resumability and Redelivery; known faults B15, B16.

- An event id names its stream and its place in it: ``<stream id>:<sequence>``, the stream id
  16 lowercase hex characters (random, made per stream), the sequence a per-stream counter
  from 1. Ids are unique across every stream of a session, and a ``Last-Event-ID`` leads to
  exactly one stream. :func:`parse_event_id` accepts nothing else (``InvalidEventIdError``).
- Streams are keyed by session **and** stream id (:class:`StreamKey`): an id taken from
  another session (of the same or another tenant) finds nothing, exactly like an id that was
  never issued, so there is no existence oracle (B16). Sessions are bound to their principal
  before any lookup happens.

Where the events are kept under these keys: ``events.py``.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Final

from ..errors import InvalidEventIdError

__all__ = ["StreamKey", "format_event_id", "new_stream_id", "parse_event_id"]

_EVENT_ID: Final = re.compile(r"([0-9a-f]{16}):(0|[1-9][0-9]{0,17})")


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
