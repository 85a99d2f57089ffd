"""The response of a resumable 2025 ``tools/call``: plain JSON when its result comes before
any notification, else an SSE stream whose every event is stored first (spec 2025-11-25
``basic/transports`` §Sending Messages item 6; see ``_transport.resumable`` for the rules).

The call runs inside this response; its connection only tails the stored stream, so:

- a client that disconnects does not cancel the call (2025: disconnection SHOULD NOT be read
  as cancellation); the call runs on and a ``GET`` + ``Last-Event-ID`` resumes its stream;
- ``ctx.close_sse_stream()`` (clients at 2025-11-25 or later) starts the stream if need be
  (priming event), then closes the connection after a ``retry`` hint; the call goes on;
- at shutdown the same happens to every call of such a client (``_transport.shutdown``).

``CallResponse`` in ``_streams`` is the non-resumable twin (2026 era, sessionless 2025,
``MCP_HTTP_RESUMABILITY=false``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup
from fastapi.background import BackgroundTasks
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._jsonrpc import dumps
from .._sessions import SessionRecord
from .._streams import Reply, Runner
from ..context import CallState, CancelSignal
from .events import StreamKey, UnknownStreamError, new_stream_id
from .resumable import ResumableStreams, sse_headers
from .sse import Connection, tail

__all__ = ["ResumableCallResponse", "answered_stream"]


class PreparedCallLike(Protocol):
    """The parts of a dispatcher ``PreparedCall`` a resumable response runs."""

    @property
    def runner(self) -> Runner: ...
    @property
    def signal(self) -> CancelSignal: ...
    @property
    def background(self) -> BackgroundTasks: ...
    @property
    def cancelled_message(self) -> Callable[[], Reply | None]: ...
    @property
    def state(self) -> CallState | None: ...




@dataclass(frozen=True, slots=True)
class _AnsweredCall:
    """A call whose reply is known already (see :meth:`ResumableStreams.reply_response`)."""

    reply: Reply
    signal: CancelSignal = field(default_factory=CancelSignal)
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    state: CallState | None = None

    @property
    def runner(self) -> Runner:
        reply = self.reply

        async def run(_outbound: Any) -> Reply:
            return reply

        return run

    def cancelled_message(self) -> Reply | None:
        return None


class _StreamControl:
    """What ``ctx.close_sse_stream()`` / ``ctx.close_standalone_sse_stream()`` reach."""

    def __init__(self, response: ResumableCallResponse) -> None:
        self._response = response

    async def close_connection(self) -> bool:
        return await self._response.close_connection()

    async def close_standalone(self) -> bool:
        response = self._response
        return response.streams.close_get_connection(response.session.id)


class ResumableCallResponse(Response):
    """A resumable call: JSON when the result comes first, else a stored SSE stream.

    See the module docstring; ``CallResponse`` in ``_streams`` is the non-resumable twin.
    """

    def __init__(
        self,
        streams: ResumableStreams,
        call: PreparedCallLike,
        session: SessionRecord,
        headers: Mapping[str, str],
        *,
        sse_allowed: bool,
        json_allowed: bool,
    ) -> None:
        self.streams = streams
        self.session = session
        self._call = call
        self._extra_headers = dict(headers)
        self._sse_allowed = sse_allowed
        self._json_allowed = json_allowed
        self._retry_ms = streams.retry_ms(session.protocol_version)
        self._background = call.background
        self.background = None
        self.status_code = 200
        self._lock = anyio.Lock()
        self._key: StreamKey | None = None
        self._answered_json = False
        self._connection: Connection | None = None
        self._send: Send | None = None
        self._receive: Receive | None = None
        self._tg: TaskGroup | None = None

    def add_headers(self, headers: Sequence[tuple[str, str]]) -> None:
        """Send these headers too (set by a request-level dependency)."""
        self._extra_headers.update(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send, self._receive = send, receive
        call = self._call
        if call.state is not None:
            call.state.stream_control = _StreamControl(self)
        remove = None
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                if self._retry_ms is not None and self._sse_allowed:
                    remove = self.streams.coordinator.add_stream(self._close_at_shutdown)
                reply: Reply | None = None
                with anyio.CancelScope() as handler_scope:
                    call.signal.bind(handler_scope)
                    try:
                        reply = await call.runner(self._outbound)
                    finally:
                        call.signal.bind(None)
                if handler_scope.cancelled_caught:
                    reply = call.cancelled_message()
                await self._finish(reply)
                tg.cancel_scope.cancel()  # the disconnect watcher
        finally:
            if remove is not None:
                remove()
            if call.state is not None:
                call.state.stream_control = None
        await self._background()

    async def _outbound(self, message: dict[str, Any]) -> None:
        if not self._sse_allowed or self._call.signal.cancelled:
            return
        key = await self._stream()
        if key is not None:
            try:
                await self.streams.store.append(key, dumps(message))
            except UnknownStreamError:
                pass  # the session ended meanwhile

    async def _stream(self) -> StreamKey | None:
        """The call's stream, started (stored, priming event, SSE response begun) at first need;
        None once the call was answered as JSON."""
        async with self._lock:
            if self._key is not None or self._answered_json:
                return self._key
            streams, send = self.streams, self._send
            assert send is not None and self._tg is not None
            key = StreamKey(self.session.id, new_stream_id())
            await streams.store.open(key)
            streams.call_stream_started(key)
            if self._retry_ms is not None:
                await streams.store.append(key, None)  # the priming event
            self._key = key
            await send({"type": "http.response.start", "status": 200, "headers": sse_headers(self._extra_headers)})
            self._connection = connection = Connection(key, self._retry_ms, "post")
            detach = streams.attachments.attach(connection)  # closable from now on
            self._tg.start_soon(self._write, connection, detach)
            return key

    async def _write(self, connection: Connection, detach: Callable[[], None]) -> None:
        assert self._send is not None and self._receive is not None
        receive, streams = self._receive, self.streams

        async def watch() -> None:  # the client went away: stop writing, the call goes on
            while (await receive())["type"] != "http.disconnect":
                pass
            connection.drop("gone")

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await tail(streams.store, connection, self._send, 0, keepalive=streams.settings.keepalive_seconds)
                tg.cancel_scope.cancel()
        finally:
            detach()

    async def close_connection(self) -> bool:
        """End this call's current connection (starting the stream if need be) after a ``retry``
        hint; the call goes on. False for clients before 2025-11-25, JSON-only clients, or a call
        already answered."""
        if self._retry_ms is None or not self._sse_allowed:
            return False
        key = await self._stream()
        return key is not None and self.streams.close_connection(key)

    async def _close_at_shutdown(self) -> None:
        if await self.close_connection() and self._connection is not None:
            await self._connection.wait_finished()

    async def _finish(self, reply: Reply | None) -> None:
        async with self._lock:
            pending = self._key is None
            if pending and (self._json_allowed or reply is None):
                self._answered_json = True
        if pending and self._answered_json:
            await self._send_json(reply)
            return
        key = await self._stream()
        assert key is not None
        store = self.streams.store
        try:
            if reply is None:
                await store.end(key)
            else:
                await store.append(key, dumps(reply.message), last=True)
        except UnknownStreamError:
            pass
        finally:
            await self.streams.call_stream_finished(key)
        if self._connection is not None:
            await self._connection.wait_finished()

    async def _send_json(self, reply: Reply | None) -> None:
        send = self._send
        assert send is not None
        if reply is None:
            headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self._extra_headers.items()]
            await send({"type": "http.response.start", "status": 202, "headers": headers})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        body = dumps(reply.message)
        merged = {**self._extra_headers, **reply.headers}
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in merged.items())
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def answered_stream(streams: ResumableStreams, reply: Reply, session: SessionRecord, headers: Mapping[str, str]) -> Response:
    """A plain reply to a resumable client that accepts only ``text/event-stream``: a stored
    stream of its own (priming event, then the reply)."""
    return ResumableCallResponse(streams, _AnsweredCall(reply), session, headers, sse_allowed=True, json_allowed=False)
