"""The in-process wire of :class:`~fastapi_mcp_ctx.testing.McpTestClient`: one request run
against an ASGI app with its response body read as the app sends it.

``httpx.ASGITransport`` (httpx 0.28) returns a response only once the app has sent the whole
body, so a 2025-era call that waits for the client's answer to a server→client request
(``elicitation/create`` on the call's SSE stream) could never be answered through it.
:func:`stream_asgi` runs the app in a task of its own and hands over each body chunk through a
memory stream; :func:`exchange` decodes the SSE events (or the JSON body) as they arrive and
gives each JSON-RPC message to a callback, which may POST answers on the same session while
the call is still open (spec 2025-11-25 ``basic/transports`` §Sending Messages).

Everything is bounded: the caller wraps an exchange in its own timeout; on leaving, a
response still open is told ``http.disconnect`` and its app task cancelled after ``grace``
seconds.
"""

from __future__ import annotations

import codecs
import json
import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.types import ASGIApp, Message

from .._server.http import replaying_receive

__all__ = ["Streamed", "exchange", "messages_of", "stream_asgi"]

OnMessage = Callable[[dict[str, Any]], Awaitable[None]]
"""Called with each JSON-RPC message of a response, in order, while the response streams."""


@dataclass(slots=True)
class Streamed:
    """A response being received: ``status``, ``headers`` and the body ``chunks`` (bytes)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    chunks: MemoryObjectReceiveStream[bytes]
    failure: list[BaseException] = field(default_factory=lambda: [])

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Each body chunk as the app sends it; re-raises the app's exception at the end."""
        async for chunk in self.chunks:
            yield chunk
        if self.failure:
            raise self.failure[0]


def _scope(request: httpx.Request) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "headers": [(k.lower(), v) for (k, v) in request.headers.raw],
        "scheme": request.url.scheme,
        "path": request.url.path,
        "raw_path": request.url.raw_path.split(b"?")[0],
        "query_string": request.url.query,
        "server": (request.url.host, request.url.port),
        "client": ("127.0.0.1", 123),
        "root_path": "",
    }


@asynccontextmanager
async def stream_asgi(app: ASGIApp, request: httpx.Request, *, grace: float = 1.0) -> AsyncGenerator[Streamed]:
    """Run ``app`` on ``request`` and yield the response once its headers are sent.

    The body arrives through :meth:`Streamed.aiter_bytes` as the app sends it. On leaving the
    block the app is told the client disconnected; an app still running ``grace`` seconds later
    is cancelled.

    Raises:
        Exception: whatever the app raised (before its response started: here; after: at the
            end of :meth:`Streamed.aiter_bytes`).
        RuntimeError: the app returned without sending a response.
    """
    body = await request.aread()
    send_chunk, receive_chunk = anyio.create_memory_object_stream[bytes](math.inf)
    started, finished, disconnected = anyio.Event(), anyio.Event(), anyio.Event()
    head: dict[str, Any] = {}
    failure: list[BaseException] = []

    async def until_disconnected() -> Message:
        await disconnected.wait()
        return {"type": "http.disconnect"}

    receive = replaying_receive(body, until_disconnected)  # the whole body once, then the client's disconnect

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            head.update(status=int(message["status"]), headers=list(message.get("headers", [])))
            started.set()
        elif message["type"] == "http.response.body":
            chunk = cast(bytes, message.get("body", b""))
            if chunk and request.method != "HEAD":
                send_chunk.send_nowait(chunk)
            if not message.get("more_body", False):
                send_chunk.close()

    async def run() -> None:
        try:
            await app(_scope(request), receive, send)
        except Exception as exc:  # handed to the reader, as httpx.ASGITransport raises app errors
            failure.append(exc)
        finally:
            send_chunk.close()
            finished.set()
            started.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await started.wait()
            try:
                if "status" not in head:
                    if failure:
                        raise failure[0]
                    raise RuntimeError(f"{request.method} {request.url.path}: the app returned without sending a response")
                yield Streamed(head["status"], head["headers"], receive_chunk, failure)
            finally:
                disconnected.set()
                with anyio.move_on_after(grace, shield=True):
                    await finished.wait()
                group.cancel_scope.cancel()
                receive_chunk.close()
    except BaseExceptionGroup as grouped:  # the app task never raises: one error, the reader's own
        if len(grouped.exceptions) == 1:
            raise grouped.exceptions[0] from None
        raise


class SseDecoder:
    """Incremental ``text/event-stream`` decoding: :meth:`feed` text, get each event's ``data``."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[str]:
        """The ``data`` of every event completed by ``text`` (multi-line data joined by ``\\n``)."""
        self._buffer = (self._buffer + text).replace("\r\n", "\n")
        datas: list[str] = []
        while "\n\n" in self._buffer:
            block, self._buffer = self._buffer.split("\n\n", 1)
            lines = [ln[5:].removeprefix(" ") for ln in block.split("\n") if ln.startswith("data:")]
            if lines and "\n".join(lines).strip():
                datas.append("\n".join(lines))
        return datas


def messages_of(content_type: str, body: bytes) -> list[dict[str, Any]]:
    """Every JSON-RPC message of a whole response body: the JSON object, or each SSE ``data`` event."""
    if content_type.startswith("text/event-stream"):
        return [json.loads(data) for data in SseDecoder().feed(body.decode() + "\n\n")]
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        return []
    return [cast(dict[str, Any], parsed)] if isinstance(parsed, dict) else []


async def exchange(app: ASGIApp, request: httpx.Request, on_message: OnMessage) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """Send ``request`` to ``app``; call ``on_message`` for each JSON-RPC message as it arrives
    (SSE) or once the body is complete (JSON); return the whole response and its messages.

    Raises:
        Exception: what the app or ``on_message`` raised.
    """
    async with stream_asgi(app, request) as streamed:
        headers = httpx.Headers(streamed.headers)
        sse = headers.get("content-type", "").startswith("text/event-stream")
        decoder, body, messages = SseDecoder(), bytearray(), list[dict[str, Any]]()
        text = codecs.getincrementaldecoder("utf-8")()
        async for chunk in streamed.aiter_bytes():
            body.extend(chunk)
            if sse:
                for data in decoder.feed(text.decode(chunk)):
                    message = json.loads(data)
                    if isinstance(message, dict):
                        messages.append(cast(dict[str, Any], message))
                        await on_message(cast(dict[str, Any], message))
        if not sse:
            messages = messages_of(headers.get("content-type", ""), bytes(body))
            for message in messages:
                await on_message(message)
    response = httpx.Response(streamed.status, headers=headers, content=bytes(body), request=request)
    return response, messages
