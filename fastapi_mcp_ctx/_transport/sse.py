"""One HTTP connection of a resumable SSE stream: it tails the stream's events in the
:class:`~._transport.events.EventStore` and writes them as SSE frames.

Spec 2025-11-25 ``basic/transports`` §Sending Messages item 6, §Listening for Messages,
§Resumability and Redelivery. Replay and live delivery are one loop (read the store after the
cursor, wait for the next event), so a connection that resumes a stream gets every kept event
after its ``Last-Event-ID``, in emission order, then whatever the stream still produces.

- A stored empty event is sent as ``id: <id>`` + ``retry: <ms>`` (for 2025-11-25 clients) +
  ``data:`` (the priming event); every other event as ``id`` + ``event: message`` + ``data``.
- :meth:`Connection.close` is the server closing the *connection*, not the stream: what is
  stored is flushed, a ``retry: <ms>`` field follows, and the response ends, so the client
  resumes with ``GET`` + ``Last-Event-ID`` after that many milliseconds.
- At most one connection is attached to a stream (:class:`Attachments`); a newer one (a
  resume) takes over, and the older one stops. Idle connections get ``: keep-alive`` comments.
  A call's own POST response is attached too, but writes as the call runs (no tail).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Final, Literal, Protocol

import anyio
from starlette.types import Send

from ..errors import StateUnavailableError
from .event_ids import StreamKey
from .events import EventStore, StoredEvent, UnknownStreamError
from .streams import SSE_HEADERS, sse_frame

__all__ = ["Attached", "Attachments", "Connection", "End", "closer", "event_frame", "retry_frame", "sse_headers", "tail"]

End = Literal["ended", "closed", "gone", "replaced", "dropped"]
"""Why a connection ended: its stream ended (final event sent), the server closed it (retry
hint sent), the client went away, a newer connection took the stream over, or the stream was
dropped (its session ended)."""

KEEPALIVE: Final = b": keep-alive\r\n\r\n"
_FLUSH_SECONDS: Final = 5.0
_RETRY_SECONDS: Final = 0.5
_MIN_WAIT: Final = 0.05
_LAPSE_MARGIN: Final = 0.25
"""Seconds past a call's lease before its reader looks again (the lease is on Redis's clock)."""
_KEEPALIVE_DUE: Final = 0.9
_OUTAGE_GRACE: Final = 2.0
"""Seconds of a reachable store after an outage before a call's lapsed lease counts (its
replica retries its renewal every 0.5 s: an outage alone never makes a call lost)."""


def event_frame(key: StreamKey, event: StoredEvent, retry_ms: int | None) -> bytes:
    """The SSE frame of one stored event (an empty event carries ``retry`` when given)."""
    if event.data is None:
        retry = f"retry: {retry_ms}\r\n" if retry_ms is not None else ""
        return f"id: {key.event_id(event.seq)}\r\n{retry}data: \r\n\r\n".encode()
    return sse_frame(event.data, key.event_id(event.seq))


def retry_frame(retry_ms: int) -> bytes:
    """A bare ``retry`` field: how long the client waits before it resumes."""
    return f"retry: {retry_ms}\r\n\r\n".encode()


class Connection:
    """The writer side of one SSE response attached to one stream.

    Args:
        key: the stream it tails.
        retry_ms: the ``retry`` it announces (priming events, before a server-side close);
            None for clients before 2025-11-25 (no priming, never closed early).
        kind: ``"post"`` (a call's own response) or ``"get"`` (a GET: the session's stream or a resume).
    """

    __slots__ = ("_hard", "_waiting", "finished", "key", "kind", "reason", "retry_ms")

    def __init__(self, key: StreamKey, retry_ms: int | None, kind: Literal["post", "get"] = "get") -> None:
        self.key = key
        self.retry_ms = retry_ms
        self.kind: Literal["post", "get"] = kind
        self.reason: End | None = None
        self.finished = anyio.Event()
        self._hard = anyio.CancelScope()
        self._waiting: anyio.CancelScope | None = None

    def close(self) -> bool:
        """End the connection, not the stream: flush, send the ``retry`` hint, end the response.

        Returns:
            False when this connection announces no ``retry`` (a client before 2025-11-25) or
            has ended already.
        """
        if self.reason is not None or self.retry_ms is None:
            return False
        self.reason = "closed"
        if self._waiting is not None:
            self._waiting.cancel()
        self._hard.deadline = anyio.current_time() + _FLUSH_SECONDS  # a stuck client cannot hold it
        return True

    async def aclose(self) -> bool:
        """:meth:`close`, for callers that hold any :class:`Attached`."""
        return self.close()

    def drop(self, reason: End) -> None:
        """Stop writing at once (client gone, taken over, stream dropped)."""
        if self.reason is None or self.reason == "closed":
            self.reason = reason
            self._hard.cancel()

    async def wait_finished(self) -> None:
        """Return once the writer has ended."""
        await self.finished.wait()


async def _body(send: Send, body: bytes, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": more})


async def tail(store: EventStore, connection: Connection, send: Send, after: int, *, keepalive: float, end_body: bool = True) -> End:
    """Write ``connection``'s stream from cursor ``after`` until it ends or the connection does.

    The response has started (status and headers sent); this writes its body and ends it
    (``end_body`` False: not when the stream ended, the caller continues the body).

    Returns:
        Why the connection ended (see :data:`End`).
    """
    cursor = after
    key = connection.key
    written = anyio.current_time()
    probe_at: float | None = written  # when to ask whether the stream's producer died (None: it has none)
    try:
        with connection._hard:  # pyright: ignore[reportPrivateUsage]
            try:
                while connection.reason is None:
                    page = None
                    now = anyio.current_time()
                    wait = max(_MIN_WAIT, keepalive - (now - written))
                    if probe_at is not None:
                        wait = min(wait, max(_MIN_WAIT, probe_at - now))
                    with anyio.CancelScope() as waiting:
                        connection._waiting = waiting  # pyright: ignore[reportPrivateUsage]
                        if connection.reason is None:
                            try:
                                page = await store.read(key, cursor, wait=wait)
                                if not page.events and not page.ended and probe_at is not None and anyio.current_time() >= probe_at:
                                    # a call whose replica died: once its lease lapses, call_lost ends the stream
                                    lapse = await store.end_lapsed(key)
                                    if lapse == 0:
                                        continue
                                    probe_at = None if lapse is None else anyio.current_time() + lapse + _LAPSE_MARGIN
                            except StateUnavailableError:  # the store is unreachable: keep the connection, retry
                                await _body(send, KEEPALIVE)
                                written = anyio.current_time()
                                if probe_at is not None:  # the running replica could not renew either: let it first
                                    probe_at = written + _OUTAGE_GRACE
                                await anyio.sleep(min(keepalive, _RETRY_SECONDS))
                                continue
                    connection._waiting = None  # pyright: ignore[reportPrivateUsage]
                    if page is None:
                        break  # close() woke us: flush below
                    if not page.events and not page.ended:
                        now = anyio.current_time()
                        if now - written >= keepalive * _KEEPALIVE_DUE:
                            await _body(send, KEEPALIVE)
                            written = now
                        continue
                    written = anyio.current_time()
                    for event in page.events:
                        await _body(send, event_frame(key, event, connection.retry_ms))
                        cursor = event.seq
                    if page.ended:
                        connection.reason = "ended"
                if connection.reason == "closed":
                    while True:  # flush what is stored, then the hint
                        page = await store.read(key, cursor)
                        for event in page.events:
                            await _body(send, event_frame(key, event, connection.retry_ms))
                            cursor = event.seq
                        if page.ended:
                            connection.reason = "ended"
                            break
                        if not page.events:
                            break
                    if connection.reason == "closed" and connection.retry_ms is not None:
                        await _body(send, retry_frame(connection.retry_ms))
            except UnknownStreamError:
                connection.reason = "dropped"
            if end_body or connection.reason != "ended":
                await _body(send, b"", more=False)
    finally:
        connection.finished.set()
    if connection._hard.cancelled_caught and connection.reason != "gone":  # pyright: ignore[reportPrivateUsage]
        with anyio.move_on_after(1.0), anyio.CancelScope(shield=True):
            try:
                await _body(send, b"", more=False)  # taken over / dropped: end the body
            except Exception:  # noqa: BLE001 - the connection may be gone already
                pass
    return connection.reason or "gone"


class Attached(Protocol):
    """A connection attached to a stream: a GET tailing it (:class:`Connection`), or a call's
    own POST response writing it as the call runs (``_transport.resumable_call``)."""

    @property
    def key(self) -> StreamKey: ...
    @property
    def kind(self) -> Literal["post", "get"]: ...
    @property
    def reason(self) -> End | None: ...

    async def aclose(self) -> bool:
        """End the connection (not the stream) after a ``retry`` hint; False when it cannot."""
        ...

    def drop(self, reason: End) -> None:
        """Stop writing at once."""
        ...

    async def wait_finished(self) -> None:
        """Return once nothing more is written."""
        ...


class Attachments:
    """Which connection is attached to which stream, in this process (one each at most).

    Args:
        on_attach: called with each attached connection; returns a callable run when it
            detaches (the shutdown registry uses it, see ``_transport.shutdown``).
    """

    def __init__(self, on_attach: Callable[[Attached], Callable[[], None]]) -> None:
        self._by_key: dict[StreamKey, Attached] = {}
        self._on_attach = on_attach

    def get(self, key: StreamKey) -> Attached | None:
        """The connection attached to ``key``, if any."""
        return self._by_key.get(key)

    def connections(self, session_id: str | None = None) -> list[Attached]:
        """Every attached connection (of one session, when given)."""
        return [c for k, c in self._by_key.items() if session_id is None or k.session_id == session_id]

    def attach(self, connection: Attached) -> Callable[[], None]:
        """Attach ``connection`` to its stream (a previous connection of it is taken over).

        Returns:
            ``detach``, to call once its writer ended.
        """
        previous = self._by_key.get(connection.key)
        if previous is not None:
            previous.drop("replaced")
        self._by_key[connection.key] = connection
        release = self._on_attach(connection)

        def detach() -> None:
            release()
            if self._by_key.get(connection.key) is connection:
                del self._by_key[connection.key]

        return detach

    async def serve(
        self, store: EventStore, connection: Connection, send: Send, after: int, *, keepalive: float, end_body: bool = True
    ) -> End:
        """Attach ``connection``, tail its stream from ``after`` (see :func:`tail`), detach."""
        detach = self.attach(connection)
        try:
            return await tail(store, connection, send, after, keepalive=keepalive, end_body=end_body)
        finally:
            detach()


def closer(connection: Attached) -> Callable[[], Awaitable[None]]:
    """An async closer for the shutdown registry: close the connection after a ``retry`` hint
    and wait for its writer. A connection without ``retry`` (a client before 2025-11-25) is
    ended when it is a GET; a call's own response is left to finish within the grace."""

    async def close() -> None:
        if connection.reason is None and not await connection.aclose():
            if connection.kind == "post":
                return
            connection.drop("dropped")
        await connection.wait_finished()

    return close


def sse_headers(extra: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """The raw headers of an SSE response (``extra`` added: ``mcp-session-id``...)."""
    merged = {**SSE_HEADERS, **extra}
    raw = [(b"content-type", b"text/event-stream")]
    raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in merged.items())
    return raw
