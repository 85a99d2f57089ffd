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

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.background import BackgroundTasks
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ._jsonrpc import dumps
from .context import CancelSignal

__all__ = ["SSE_HEADERS", "CallResponse", "Reply", "StandaloneStream", "sse_frame"]

SSE_HEADERS: Final[dict[str, str]] = {
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
}
_FINAL: Final = object()

Outbound = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Reply:
    """The final message of a call, with the HTTP status and headers used when sent as JSON."""

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
        background: tasks run after the response is sent.
        cancelled_message: message sent when the call is cancelled by ``notifications/cancelled``
            while the connection is still open (2025 era; None sends nothing).
    """

    def __init__(
        self,
        runner: Runner,
        signal: CancelSignal,
        *,
        headers: Mapping[str, str] | None = None,
        sse_allowed: bool = True,
        background: BackgroundTasks | None = None,
        cancelled_message: Callable[[], Reply | None] | None = None,
    ) -> None:
        self._runner = runner
        self._signal = signal
        self._extra_headers = dict(headers or {})
        self._sse_allowed = sse_allowed
        self.background = background
        self._cancelled_message = cancelled_message
        self.status_code = 200

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        send_stream, receive_stream = anyio.create_memory_object_stream[Any](max_buffer_size=math.inf)
        final: list[Reply | None] = [None]
        disconnected = False

        async def outbound(message: dict[str, Any]) -> None:
            if self._sse_allowed:
                await send_stream.send(message)

        async def run() -> None:
            with anyio.CancelScope() as handler_scope:
                self._signal.bind(handler_scope)
                final[0] = await self._runner(outbound)
            self._signal.bind(None)
            if handler_scope.cancelled_caught and self._cancelled_message is not None:
                final[0] = self._cancelled_message()
            await send_stream.send(_FINAL)

        async def watch_disconnect() -> None:
            nonlocal disconnected
            while True:
                message: Message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected = True
                    self._signal.cancel("disconnected")
                    return

        sse_started = False
        final_sent = False
        async with anyio.create_task_group() as tg:
            watcher = anyio.CancelScope()

            async def watch() -> None:
                with watcher:
                    await watch_disconnect()

            tg.start_soon(run)
            tg.start_soon(watch)
            async with receive_stream:
                async for item in receive_stream:
                    if item is _FINAL:
                        watcher.cancel()  # from here on, a disconnect is the normal end of the response
                        break
                    if disconnected:
                        continue
                    if not sse_started:
                        sse_started = True
                        await send(
                            {
                                "type": "http.response.start",
                                "status": 200,
                                "headers": _raw_headers({**SSE_HEADERS, **self._extra_headers}, b"text/event-stream"),
                            }
                        )
                    await send({"type": "http.response.body", "body": sse_frame(item), "more_body": True})
            if not disconnected:
                await self._send_final(send, final[0], sse_started)
                final_sent = True
            tg.cancel_scope.cancel()
        if self.background is not None and final_sent:
            await self.background()

    async def _send_final(self, send: Send, reply: Reply | None, sse_started: bool) -> None:
        if sse_started:
            body = sse_frame(reply.message) if reply is not None else b""
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        if reply is None:
            await send({"type": "http.response.start", "status": 202, "headers": _raw_headers(self._extra_headers, b"application/json")})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        body = dumps(reply.message)
        headers = _raw_headers({**self._extra_headers, **reply.headers}, b"application/json")
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
        self.background = None

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
