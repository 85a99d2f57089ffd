"""The session's 2025 GET stream: its log (:class:`GetLog`: the inbox fed from the bus, who
holds its connection) and :class:`GetResponse`, the ASGI response serving it from its start or
a resumed stream from a ``Last-Event-ID`` cursor (an ended GET stream continues on the
session's current one). Spec 2025-11-25 ``basic/transports`` §Listening for Messages,
§Resumability and Redelivery.

:class:`~._transport.resumable.ResumableStreams` makes both (``get``, ``open_get_stream``);
the response reaches it through :class:`GetStreams`, what it needs of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from fastapi.background import BackgroundTasks
from starlette.background import BackgroundTask
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..errors import McpError
from ..settings import McpSettings
from .event_ids import StreamKey
from .events import EventStore
from .leases import StreamLeases, hold
from .sessions import SessionRecord
from .shutdown import ShutdownCoordinator
from .sse import Attachments, Connection, sse_headers

__all__ = ["GetLog", "GetResponse", "GetStreams"]


@dataclass(eq=False, slots=True)
class GetLog:
    """The session's GET stream: its inbox (fed from the bus) and who holds its connection."""

    key: StreamKey
    send: MemoryObjectSendStream[dict[str, Any]]
    receive: MemoryObjectReceiveStream[dict[str, Any]]
    holder: object | None = None
    detached_at: float | None = None
    release_bus: Callable[[], None] | None = None
    retired: bool = False
    dropped: bool = False  # retired because its session ended (its stored events go too)
    tasks: set[asyncio.Task[None]] = field(default_factory=lambda: set())


class GetStreams(Protocol):
    """What a :class:`GetResponse` needs of its router's ``ResumableStreams``."""

    @property
    def store(self) -> EventStore: ...

    @property
    def settings(self) -> McpSettings: ...

    @property
    def coordinator(self) -> ShutdownCoordinator: ...

    @property
    def leases(self) -> StreamLeases: ...

    @property
    def attachments(self) -> Attachments: ...

    def retired(self, key: StreamKey) -> bool: ...

    async def open_get_stream(self, session: SessionRecord, tenant_id: str | None, holder: object) -> GetLog: ...

    def release_get_stream(self, log: GetLog, holder: object) -> None: ...


class GetResponse(Response):
    """A 2025 GET: the session's GET stream from its start, or a resumed stream from a cursor
    (an ended GET stream continues on the session's current one)."""

    def __init__(
        self,
        streams: GetStreams,
        session: SessionRecord,
        tenant_id: str | None,
        retry_ms: int | None,
        headers: Mapping[str, str],
        *,
        resume: tuple[StreamKey, int] | None = None,
    ) -> None:
        self.streams = streams
        self.session = session
        self.tenant_id = tenant_id
        self.log: GetLog | None = None
        self._retry_ms = retry_ms
        self._extra_headers = dict(headers)
        self._resume = resume
        self.successor: GetLog | None = None  # the GET stream a resumed GET stream continues on
        self.token = streams.leases.token()
        self.leased = streams.leases.shared
        """Whether this connection holds the session's GET lease (renewed while open, released at
        its end): a GET stream's connection, never a resume of a call's stream."""
        self._connection: Connection | None = None
        self.status_code = 200
        self.background: BackgroundTask | BackgroundTasks | None = None

    def add_headers(self, headers: Sequence[tuple[str, str]]) -> None:
        """Send these headers too (set by a request-level dependency)."""
        self._extra_headers.update(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streams = self.streams
        try:
            await send({"type": "http.response.start", "status": 200, "headers": sse_headers(self._extra_headers)})
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    if self._connection is not None:
                        self._connection.drop("gone")
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                if self.leased:  # the session's GET lease, held while this connection is open
                    tg.start_soon(hold, streams.leases, self.session.id, self.token)
                if self._resume is not None:
                    key, after = self._resume
                    successor = self.successor  # a takeover's, opened already
                    more = successor is not None or (self.log is None and streams.retired(key))
                    end = await self._serve(key, after, send, end_body=not more)
                    if end != "ended" or not more or streams.coordinator.shutting_down:
                        tg.cancel_scope.cancel()
                        return
                    self.successor = None
                    self.log = successor or await streams.open_get_stream(self.session, self.tenant_id, self)
                if self.log is not None:
                    self.log.holder = self
                    await self._serve(self.log.key, 0, send)
                tg.cancel_scope.cancel()
        finally:
            if self.log is not None:
                streams.release_get_stream(self.log, self)
            if self.successor is not None:  # the replay did not reach its end: never continued
                streams.release_get_stream(self.successor, self)
            if self.leased:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2.0), contextlib.suppress(McpError):
                    await streams.leases.release(self.session.id, self.token)
        if self.background is not None:
            await self.background()

    async def _serve(self, key: StreamKey, after: int, send: Send, *, end_body: bool = True) -> str:
        streams = self.streams
        self._connection = connection = Connection(key, self._retry_ms)
        return await streams.attachments.serve(
            streams.store, connection, send, after, keepalive=streams.settings.keepalive_seconds, end_body=end_body
        )
