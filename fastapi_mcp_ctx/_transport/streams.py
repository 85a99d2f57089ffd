"""Responses that may stream: JSON when a call emits nothing first, SSE when it does.

:class:`CallResponse` runs one call inside the ASGI response: it answers
``application/json`` when the result comes before any notification, and switches to
``text/event-stream`` when the handler sends a notification (progress, log) first; every
message of the call then goes on that stream, the result last, then the stream ends
(spec 2025-11-25 ``basic/transports`` §Sending Messages to the Server; 2026-07-28
``streamable-http`` §Receiving Messages). A client disconnect cancels the call
(2026-07-28 ``basic/patterns/cancellation``). :class:`StandaloneStream` is the 2025 GET stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.background import BackgroundTask, BackgroundTasks
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from .._context.cancel_scope import new_cancel_scope
from .._context.cancel_signal import CancelSignal
from .._context.event_loop import scope_loop
from .._wire.jsonrpc import dumps

__all__ = ["SSE_HEADERS", "CallResponse", "Reply", "StandaloneStream", "run_background", "sse_frame"]

SSE_HEADERS: Final[dict[str, str]] = {
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
}

Outbound = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(slots=True)
class Reply:
    """The final message of a call, with the HTTP status and headers used when sent as JSON
    (never changed once made; not frozen: a frozen dataclass's ``__init__`` costs several times
    a plain one's, and a call makes one)."""

    message: dict[str, Any]
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=lambda: {})


Runner = Callable[[Outbound], Awaitable[Reply | None]]


def sse_frame(message: Mapping[str, Any] | bytes, event_id: str | None = None) -> bytes:
    """One SSE event: ``[id: …\\r\\n]event: message\\r\\ndata: <compact JSON>\\r\\n\\r\\n``."""
    data = message if isinstance(message, bytes) else dumps(dict(message))
    head = f"id: {event_id}\r\n".encode() if event_id else b""
    return head + b"event: message\r\ndata: " + data + b"\r\n\r\n"


def _raw_headers(headers: Mapping[str, str], content_type: bytes) -> list[tuple[bytes, bytes]]:
    raw = [(b"content-type", content_type)]
    raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items())
    return raw


WATCH_AFTER: Final = 0.05
"""Seconds a call runs before a task watches for its client's disconnect (the watcher starts
between ``WATCH_AFTER`` and twice that: :class:`_Sweep`'s ticks)."""


class _Sweep:
    """The disconnect watchers of one event loop, on one timer for all of them.

    A per-call ``loop.call_later`` (and its cancel) costs every call a timer of the loop's own
    (uvloop: a libuv timer, its heap insert and removal); almost no call lasts long enough to
    need it. Instead, each watcher joins the ``young`` set; every ``WATCH_AFTER`` seconds the
    tick starts the watchers of ``old`` (they joined before the previous tick: they have run at
    least ``WATCH_AFTER``) and ages ``young`` into ``old``. A watcher that stops leaves its set.
    The timer runs while calls come and goes away (with the sweep) after a tick that found none.
    """

    __slots__ = ("_handle", "_loop", "old", "young")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.young: set[_DisconnectWatcher] = set()
        self.old: set[_DisconnectWatcher] = set()
        self._handle: asyncio.TimerHandle | None = None

    def join(self, watcher: _DisconnectWatcher) -> set[_DisconnectWatcher]:
        """Add ``watcher``; returns the set it is in (the one it leaves on stop)."""
        young = self.young
        young.add(watcher)
        if self._handle is None:
            self._handle = self._loop.call_later(WATCH_AFTER, self._tick)
        return young

    def _tick(self) -> None:
        due, self.old, self.young = self.old, self.young, set()
        if self.old:
            self._handle = self._loop.call_later(WATCH_AFTER, self._tick)
        else:  # nothing waits: no timer until the next call (and no loop kept alive here)
            self._handle = None
            _SWEEPS.pop(self._loop, None)
        for watcher in due:
            watcher.start(self._loop)


_SWEEPS: dict[asyncio.AbstractEventLoop, _Sweep] = {}


class _DisconnectWatcher:
    """Cancels a call when its client disconnects, without a task (or a timer) per fast call.

    On asyncio a watcher task starts only once the call has lasted ``WATCH_AFTER`` seconds (a
    disconnect in the meantime is queued by the server and seen at once); most calls finish
    first and cost a place in their loop's :class:`_Sweep`, no task. Other event loops get no
    disconnect detection.
    """

    __slots__ = ("_receive", "_set", "_signal", "_task")

    def __init__(self, receive: Receive, signal: CancelSignal, loop: asyncio.AbstractEventLoop | None) -> None:
        self._receive = receive
        self._signal = signal
        self._task: asyncio.Task[None] | None = None
        # loop: the running asyncio loop (None off asyncio, trio: no watcher)
        if loop is None:
            self._set: set[_DisconnectWatcher] | None = None
            return
        sweep = _SWEEPS.get(loop)
        if sweep is None:  # a new sweep (the loop's first call after an idle tick): forget closed loops'
            for closed in [other for other in _SWEEPS if other.is_closed()]:  # (closed with a call in flight)
                del _SWEEPS[closed]
            sweep = _SWEEPS[loop] = _Sweep(loop)
        self._set = sweep.join(self)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start watching in a task of ``loop`` (the call has lasted long enough)."""
        self._set = None
        self._task = loop.create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            message: Message = await self._receive()
            if message["type"] == "http.disconnect":
                self._signal.cancel("disconnected")
                return

    def stop(self) -> None:
        """Stop watching (the call ended): after this, a disconnect is the response's normal end.
        The task is dropped too: its coroutine holds this watcher (no task <-> watcher cycle)."""
        if self._set is not None:
            self._set.discard(self)
            self._set = None
        if self._task is not None:
            self._task.cancel()
            self._task = None


async def run_background(background: BackgroundTask | BackgroundTasks | None) -> None:
    """Run a response's background task(s) (nothing to await when there are none)."""
    if background is not None and not (isinstance(background, BackgroundTasks) and not background.tasks):
        await background()


class CallResponse(Response):
    """Run ``runner`` and answer with its final JSON-RPC message, as JSON or as SSE.

    Args:
        runner: ``async (outbound) -> message | None``; ``outbound(message)`` queues a
            notification or server→client request for this call's stream. ``None`` means
            nothing is to be sent (the call was cancelled by the client).
        signal: the call's cancellation signal (set on disconnect).
        headers: extra response headers (``mcp-session-id``...).
        sse_allowed: False when the client does not accept ``text/event-stream``: messages
            other than the result are then dropped.
        json_allowed: False when the client accepts ``text/event-stream`` only: the result
            then always goes on an event stream.
        background: tasks run after the response is sent.
        cancelled_message: message sent when the call is cancelled by ``notifications/cancelled``
            while the connection is still open (2025 era; None sends nothing). It replaces the
            result whenever the signal fired, also when the handler still returned one (a sync
            tool's thread runs to its end: that late result is dropped).
    """

    def __init__(
        self,
        runner: Runner,
        signal: CancelSignal,
        *,
        headers: Mapping[str, str] | None = None,
        sse_allowed: bool = True,
        json_allowed: bool = True,
        background: BackgroundTasks | None = None,
        cancelled_message: Callable[[], Reply | None] | None = None,
    ) -> None:
        self._runner = runner
        self._signal = signal
        self._extra_headers = dict(headers or {})
        self._sse_allowed = sse_allowed
        self._json_allowed = json_allowed
        self.background = background
        self._cancelled_message = cancelled_message
        self.status_code = 200
        self._send: Send | None = None  # while the call runs: its notifications go there
        self._sse_started = False

    def add_headers(self, headers: Sequence[tuple[str, str]]) -> None:
        """Send these headers too (set by a request-level dependency)."""
        self._extra_headers.update(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send = send
        signal = self._signal
        reply: Reply | None = None
        loop = scope_loop(scope)  # the endpoint's (one look-up a request: _context.event_loop)
        with new_cancel_scope(loop) as handler_scope:
            signal.bind(handler_scope)
            watcher = _DisconnectWatcher(receive, signal, loop)
            try:
                reply = await self._runner(self._outbound)
            finally:
                watcher.stop()
                signal.bind(None)
        self._send = None
        if signal.reason == "disconnected":
            return  # the client is gone: nothing more is sent for this call
        if signal.reason is not None:
            # not only ``cancelled_caught``: a sync tool's thread cannot be interrupted, so its
            # call returns normally after the signal fired; that late result is dropped
            reply = self._cancelled_message() if self._cancelled_message is not None else None
        await self._send_final(send, reply)
        await run_background(self.background)

    async def _outbound(self, message: dict[str, Any]) -> None:
        """Queue ``message`` on this call's stream (the first one starts the SSE response)."""
        send = self._send
        if not self._sse_allowed or self._signal.cancelled or send is None:
            return
        if not self._sse_started:
            self._sse_started = True
            headers = _raw_headers({**SSE_HEADERS, **self._extra_headers}, b"text/event-stream")
            await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": sse_frame(message), "more_body": True})

    async def _send_final(self, send: Send, reply: Reply | None) -> None:
        sse_started = self._sse_started
        if not sse_started and not self._json_allowed and reply is not None:
            headers = _raw_headers({**SSE_HEADERS, **self._extra_headers}, b"text/event-stream")
            await send({"type": "http.response.start", "status": reply.status, "headers": headers})
            sse_started = True
        if sse_started:
            body = sse_frame(reply.message) if reply is not None else b""
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        if reply is None:
            await send({"type": "http.response.start", "status": 202, "headers": _raw_headers(self._extra_headers, b"application/json")})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        body = dumps(reply.message)
        extra = {**self._extra_headers, **reply.headers} if self._extra_headers or reply.headers else None
        headers = _raw_headers(extra, b"application/json") if extra else [(b"content-type", b"application/json")]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


class StandaloneStream(Response):
    """The 2025 GET stream: server notifications unrelated to a request, plus keep-alives.

    Args:
        messages: the session's standalone queue; the stream ends when it closes.
        on_close: called once when the stream ends (client gone or session ended).
        headers: extra response headers.
        keepalive_seconds: a ``: ping`` comment is written after this many idle seconds.
    """

    def __init__(
        self,
        messages: MemoryObjectReceiveStream[dict[str, Any]],
        on_close: Callable[[], None],
        *,
        headers: Mapping[str, str] | None = None,
        keepalive_seconds: float = 15.0,
    ) -> None:
        self._messages = messages
        self._on_close = on_close
        self._extra_headers = dict(headers or {})
        self._keepalive = keepalive_seconds
        self.status_code = 200
        self.background: BackgroundTask | BackgroundTasks | None = None

    def add_headers(self, headers: Sequence[tuple[str, str]]) -> None:
        """Send these headers too (set by a request-level dependency)."""
        self._extra_headers.update(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": _raw_headers({**SSE_HEADERS, **self._extra_headers}, b"text/event-stream"),
            }
        )
        await send({"type": "http.response.body", "body": b": stream open\r\n\r\n", "more_body": True})
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                while True:
                    message: dict[str, Any] | None = None
                    with anyio.move_on_after(self._keepalive) as timer:
                        try:
                            message = await self._messages.receive()
                        except (anyio.EndOfStream, anyio.ClosedResourceError):
                            break
                    if timer.cancelled_caught or message is None:
                        await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
                        continue
                    await send({"type": "http.response.body", "body": sse_frame(message), "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            self._on_close()
        await run_background(self.background)
