"""The response of a resumable 2025 ``tools/call``: plain JSON when its result comes before
any notification, else an SSE stream whose every event is stored first (spec 2025-11-25
``basic/transports`` §Sending Messages item 6; see ``_transport.resumable`` for the rules).

The call runs inside this response and writes each event to the store before its connection, so:

- a client that disconnects does not cancel the call (2025: disconnection SHOULD NOT be read
  as cancellation); the call runs on and a ``GET`` + ``Last-Event-ID`` resumes its stream;
- ``ctx.close_sse_stream()`` (clients at 2025-11-25 or later) starts the stream if need be
  (priming event), then closes the connection after a ``retry`` hint; the call goes on;
- at shutdown the same happens to every call of such a client (``_transport.shutdown``);
- with several replicas the stream is opened with the call's ``call_lost`` error and a lease of
  this replica (``MCP_SESSION_LEASE_SECONDS``, renewed every third of it while the call runs):
  should this replica die, a resumed reader ends the stream with that error once the lease
  lapsed (``EventStore.end_lapsed``), instead of keep-alives for ever.

The connection the stream is written to (writes while open, drop, disconnect watch, the body's
end) is ``_transport.call_connection``. ``CallResponse`` in ``_transport.streams`` is the non-resumable twin (2026 era, sessionless 2025,
``MCP_HTTP_RESUMABILITY=false``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

import anyio
from fastapi.background import BackgroundTasks
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._context.call_state import CallState
from .._context.cancel_scope import new_cancel_scope
from .._context.cancel_signal import CancelSignal
from .._context.event_loop import scope_loop
from .._wire.jsonrpc import dumps, error_message
from ..errors import CallLostError, ConfigurationError, StateUnavailableError
from .call_connection import WATCH_AFTER, CallConnection
from .event_ids import StreamKey, new_stream_id
from .events import StoredEvent, UnknownStreamError
from .resumable import PRIMED, ResumableStreams, sse_headers
from .sessions import SessionRecord
from .sse import End, event_frame, retry_frame
from .streams import Reply, Runner, sse_frame

__all__ = ["ResumableCallResponse", "answered_stream"]

_RENEW_RETRY: Final = 0.5
"""Seconds before a failed renewal of a call's lease is tried again."""

_STORE_FAILURES: Final = (StateUnavailableError, ConfigurationError)
"""What an event store raises when Redis is unreachable or refuses (an outage, ``maxmemory``):
the call's stream then goes out live, without ids, rather than failing the call or its answer."""


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


class ResumableCallResponse(CallConnection, Response):
    """A resumable call: JSON when the result comes first, else a stored SSE stream.

    The call's own task writes its connection as the call runs (each event is stored first,
    then written while the connection is open), so a fast call costs no extra task. It is an
    :class:`~._transport.sse.Attached` of its stream once the stream starts: a resume (``GET``
    + ``Last-Event-ID``) takes the stream over, after which this connection writes nothing more
    and ends when the call does (the connection's side: :class:`~._transport.call_connection.CallConnection`).

    It is also the call's ``stream_control`` (what ``ctx.close_sse_stream()`` and
    ``ctx.close_standalone_sse_stream()`` reach) and the stream the shutdown closes. The
    attributes a plain JSON answer never changes keep their class defaults (no per-call store).
    """

    reason: End | None  # CallConnection's (declared again: this class sets it too)
    _live = False  # the store failed when the stream began: frames go out live, without ids
    _renewal: asyncio.Task[None] | None = None
    status_code = 200
    background = None  # the call's own tasks run after its answer (``call.background``)
    _state: Literal["pending", "starting", "sse", "json"] = "pending"

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
        self._extra_headers = headers  # read only: add_headers replaces it with a copy
        self._sse_allowed = sse_allowed
        self._json_allowed = json_allowed
        # ResumableStreams.retry_ms, without its call
        self._retry_ms = streams.settings.sse_retry_ms if session.protocol_version in PRIMED else None

    def add_headers(self, headers: Sequence[tuple[str, str]]) -> None:
        """Send these headers too (set by a request-level dependency)."""
        self._extra_headers = {**self._extra_headers, **dict(headers)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send, self._receive = send, receive
        call = self._call
        state, signal = call.state, call.signal
        if state is not None:
            state.stream_control = self
        # closed with a retry hint at shutdown (the client resumes elsewhere); held: the set to leave
        held = self.streams.coordinator.hold_stream(self) if self._retry_ms is not None and self._sse_allowed else None
        try:
            reply: Reply | None = None
            with new_cancel_scope(scope_loop(scope)) as handler_scope:
                signal.bind(handler_scope)
                try:
                    reply = await call.runner(self._outbound)
                finally:
                    signal.bind(None)
            if handler_scope.cancelled_caught or signal.reason is not None:
                # a sync tool's thread cannot be interrupted: its call returns normally after the
                # signal fired, and that late result is dropped
                reply = call.cancelled_message()
            if self._state == "pending" and reply is not None and self._json_allowed:
                # the common end (_send_json inline, without its coroutine nor _finish's)
                self._state = "json"  # no await since the check: no stream can start any more
                body = dumps(reply.message)
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                for name, value in ({**self._extra_headers, **reply.headers} if reply.headers else self._extra_headers).items():
                    headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
                await send({"type": "http.response.start", "status": reply.status, "headers": headers})
                await send({"type": "http.response.body", "body": body, "more_body": False})
            else:
                await self._finish(reply)
        finally:
            if self._renewal is not None:  # the call ended (answered, cancelled, failed): no more lease
                self._renewal.cancel()
            if held is not None:
                held.discard(self)
            if state is not None:
                state.stream_control = None
        background = call.background
        if background.tasks:  # run_background, without its coroutine when there is nothing to run
            await background()

    async def _outbound(self, message: dict[str, Any]) -> None:
        if not self._sse_allowed or self._call.signal.cancelled:
            return
        async with self._guard():
            key = await self._start()
            if key is None:
                return
            data = dumps(message)
            if self._live:
                await self._write(sse_frame(data))
                return
            try:
                seq = await self.streams.store.append(key, data)
            except UnknownStreamError:
                return  # the session ended meanwhile
            except _STORE_FAILURES:  # the store is unreachable or refuses: sent live, without an id (not resumable)
                await self._write(sse_frame(data))
                return
            await self._write(sse_frame(data, key.event_id(seq)))

    async def _start(self) -> StreamKey | None:
        """The call's stream, started at first need (stored, priming event, SSE response begun;
        the caller holds the lock); None once the call was answered as JSON."""
        if self._state == "json":
            return None
        if self._stream_key is not None:
            return self._stream_key
        self._state = "starting"
        streams, send = self.streams, self._send
        assert send is not None
        key = StreamKey(self.session.id, new_stream_id())
        leases = streams.leases
        state = self._call.state
        try:
            if leases.shared and state is not None:
                # several replicas: should this one die, the call's request id gets call_lost on
                # its stream once the lease lapses (issue 24 item 4); renewed while the call runs
                lost = dumps(error_message(state.request_id, CallLostError()))
                await streams.store.open(key, lost=lost, lease_seconds=leases.lease_seconds)
            else:
                await streams.store.open(key)
            streams.call_stream_started(key)
            priming = await streams.store.append(key, None) if self._retry_ms is not None else None
        except _STORE_FAILURES:
            # the store is unreachable or refuses: the stream still goes out, live and without
            # ids (not resumable), so the call's messages and its answer reach the client
            self._live, priming = True, None
        else:
            if leases.shared and state is not None:
                self._renewal = asyncio.get_running_loop().create_task(self._renew(key, leases.lease_seconds))
        self._stream_key, self._state, self._finished = key, "sse", anyio.Event()
        self._open = True
        self._detach = streams.attachments.attach(self)  # closable and resumable from now on
        try:
            await send({"type": "http.response.start", "status": 200, "headers": sse_headers(self._extra_headers)})
        except Exception:  # noqa: BLE001 - the client is gone: the call goes on, its events are stored
            self._open = False
        self._watch_later = asyncio.get_running_loop().call_later(WATCH_AFTER, lambda: self._spawn(self._watch()))
        if priming is not None:
            await self._write(event_frame(key, StoredEvent(priming, None), self._retry_ms))
        return key

    async def _renew(self, key: StreamKey, lease_seconds: float) -> None:
        """Renew the call's lease on its stream every third of it until the call ends (an
        unreachable store is retried sooner: the lease must not lapse while the call runs)."""
        pause = lease_seconds / 3
        while True:
            await anyio.sleep(pause)
            try:
                await self.streams.store.hold(key, lease_seconds)
            except _STORE_FAILURES:
                pause = min(lease_seconds / 3, _RENEW_RETRY)
            else:
                pause = lease_seconds / 3

    # -- Attached (its other members: CallConnection) ------------------------------------------
    async def aclose(self) -> bool:
        """End this call's connection (starting its stream if need be) after a ``retry`` hint;
        the call goes on. False for clients before 2025-11-25, JSON-only clients, a call already
        answered, or a connection already closed or taken over."""
        if self._retry_ms is None or not self._sse_allowed:
            return False
        async with self._guard():
            key = await self._start()
            if key is None or not self._open or self._live:  # a live stream cannot be resumed: keep it open
                return False
            self.reason = "closed"
            await self._end(retry_frame(self._retry_ms))
            return True

    # -- StreamControl (ctx.close_sse_stream / ctx.close_standalone_sse_stream) -------------------
    async def close_connection(self) -> bool:
        """``ctx.close_sse_stream()``: see :meth:`aclose`."""
        return await self.aclose()

    async def close_standalone(self) -> bool:
        """``ctx.close_standalone_sse_stream()``: end the session's GET connection here."""
        return await self.streams.close_get_connection(self.session.id)

    # -- the end ---------------------------------------------------------------------------------
    async def _finish(self, reply: Reply | None) -> None:
        if self._state == "pending" and (self._json_allowed or reply is None):
            self._state = "json"  # no await since the check: no stream can start any more
            await self._send_json(reply)
            return
        async with self._guard():
            key = await self._start()
            assert key is not None
            store = self.streams.store
            try:
                if reply is None:
                    if not self._live:
                        await store.end(key)
                else:
                    data = dumps(reply.message)
                    if self._live:
                        await self._write(sse_frame(data))
                    else:
                        try:
                            seq = await store.append(key, data, last=True)
                        except _STORE_FAILURES:  # unreachable or refusing store: the answer still goes out, live
                            await self._write(sse_frame(data))
                        else:
                            await self._write(sse_frame(data, key.event_id(seq)))
            except (UnknownStreamError, *_STORE_FAILURES):
                pass
            finally:
                self.reason = self.reason or "ended"
                await self._end()
        await self.streams.call_stream_finished(key)

    async def _send_json(self, reply: Reply | None) -> None:
        send = self._send
        assert send is not None
        if reply is None:
            headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self._extra_headers.items()]
            await send({"type": "http.response.start", "status": 202, "headers": headers})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        body, headers = _json_answer(reply, self._extra_headers)
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _json_answer(reply: Reply, extra_headers: Mapping[str, str]) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The JSON body of ``reply`` and its response headers (``extra_headers``, then the reply's own)."""
    body = dumps(reply.message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    merged = {**extra_headers, **reply.headers} if reply.headers else extra_headers
    for name, value in merged.items():
        headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
    return body, headers


def answered_stream(streams: ResumableStreams, reply: Reply, session: SessionRecord, headers: Mapping[str, str]) -> Response:
    """A plain reply to a resumable client that accepts only ``text/event-stream``: a stored
    stream of its own (priming event, then the reply)."""
    return ResumableCallResponse(streams, _AnsweredCall(reply), session, headers, sse_allowed=True, json_allowed=False)
