"""2026-07-28 ``subscriptions/listen``: one long-lived SSE stream per listen request.

Spec 2026-07-28 ``basic/patterns/subscriptions`` and ``basic/transports/streamable-http``
§Receiving Messages; known faults B52/B53. The filter (what was asked, what is honoured,
what a stream admits) is ``listen_filter.py``'s; the rules kept here:

- ``notifications/subscriptions/acknowledged`` is the first frame; every frame, the final
  answer included, carries ``_meta["io.modelcontextprotocol/subscriptionId"]`` = the listen
  request's id with its JSON type (``"sub-1"`` stays a string, ``7`` an integer);
- each stream buffers at most ``buffer_size`` notifications: a client that falls that far
  behind gets a ``-32603`` error answer (``reason: listen_buffer_overflow``) and the stream
  ends, so a slow client never grows the server's memory;
- at most ``max_streams`` streams per process, and ``max_per_owner`` per authenticated owner
  (beyond: HTTP 503 ``-32603`` + ``Retry-After``);
- each stream records its tenant and owner: a bus message carrying :data:`TENANT_KEY` (a
  resource update) reaches only that tenant's streams; list changes reach every stream;
- an empty honoured filter is acknowledged and answered at once; :meth:`ListenHub.close`
  (router shutdown) ends every stream with the graceful ``{"resultType": "complete"}``
  answer; a client closing the stream ends it silently; idle streams get ``: keep-alive``
  comments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final, Literal

import anyio
from starlette.background import BackgroundTask, BackgroundTasks
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._wire.jsonrpc import RequestId, notification_message
from ..errors import StateUnavailableError
from .listen_filter import LIST_CHANGED_METHODS, TASK_METHOD, ChangeKind, ListenFilter, Served, parse_filter
from .streams import SSE_HEADERS, sse_frame

# LIST_CHANGED_METHODS, TASK_METHOD, ChangeKind, ListenFilter, Served and parse_filter live in
# listen_filter.py; they stay importable from here, where they were defined before.
__all__ = [
    "LIST_CHANGED_METHODS",
    "SUBSCRIPTION_ID_KEY",
    "TASK_METHOD",
    "TASK_OWNER_KEY",
    "TENANT_KEY",
    "ChangeKind",
    "ListenFilter",
    "ListenHub",
    "ListenResponse",
    "ListenStream",
    "Served",
    "parse_filter",
]

SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
ACK_METHOD: Final = "notifications/subscriptions/acknowledged"
TENANT_KEY: Final = "fastapi_mcp_ctx.tenant"
"""Bus-only member of a notification published for one tenant (never sent on the wire)."""
TASK_OWNER_KEY: Final = "fastapi_mcp_ctx.task_owner"
"""Bus-only member of a task notification: the task's owner (``_tasks.records.owner_key``)."""

End = Literal["closed", "overflow", "disconnected"]


def _tag(message: Mapping[str, Any], subscription_id: RequestId) -> dict[str, Any]:
    params: dict[str, Any] = dict(message.get("params") or {})
    params["_meta"] = {**(params.get("_meta") or {}), SUBSCRIPTION_ID_KEY: subscription_id}
    return notification_message(str(message["method"]), params)


class ListenStream:
    """The queue of one listen stream between the bus (producer) and its response (consumer)."""

    def __init__(
        self,
        request_id: RequestId,
        listen_filter: ListenFilter,
        buffer_size: int,
        *,
        tenant_id: str | None = "default",
        owner: str | None = None,
        task_owner: str | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self.owner = owner
        self.task_owner = task_owner
        self.request_id = request_id
        self.filter = listen_filter
        self.buffer_size = buffer_size
        self.end: End | None = None
        self._send, self.messages = anyio.create_memory_object_stream[dict[str, Any]](buffer_size)

    def offer(self, message: Mapping[str, Any]) -> bool:
        """Queue ``message`` (tagged) when the filter admits it; never blocks.

        Returns:
            True when queued. A full buffer ends the stream (``overflow``) instead.
        """
        if self.end is not None or not self.filter.admits(message):
            return False
        if TENANT_KEY in message and message[TENANT_KEY] != self.tenant_id:
            return False  # another tenant's resource
        if TASK_OWNER_KEY in message and message[TASK_OWNER_KEY] != self.task_owner:
            return False  # another owner's task (its id named by a guess)
        try:
            self._send.send_nowait(_tag(message, self.request_id))
        except anyio.WouldBlock:
            self.finish("overflow")
            return False
        return True

    def finish(self, reason: End) -> None:
        """End the stream (first reason wins); queued notifications still drain unless overflowed."""
        if self.end is None:
            self.end = reason
            self._send.close()

    def acknowledgement(self) -> dict[str, Any]:
        """The first frame: ``notifications/subscriptions/acknowledged`` with the honoured subset."""
        return notification_message(
            ACK_METHOD, {"_meta": {SUBSCRIPTION_ID_KEY: self.request_id}, "notifications": self.filter.acknowledged()}
        )

    def final_message(self) -> dict[str, Any] | None:
        """The answer to the listen request when the stream ends, or None (client gone)."""
        if self.end == "disconnected":
            return None
        if self.end == "overflow":
            error = {
                "code": -32603,
                "message": f"The subscriptions/listen stream fell {self.buffer_size} notifications behind and was ended",
                "data": {
                    "requestId": self.request_id,
                    "reason": "listen_buffer_overflow",
                    "recovery": {"hint": "Listen again, then refetch the lists you depend on"},
                },
            }
            return {"jsonrpc": "2.0", "id": self.request_id, "error": error}
        result = {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: self.request_id}}
        return {"jsonrpc": "2.0", "id": self.request_id, "result": result}


def _running_loop() -> object:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # not on asyncio
        return None


class ListenHub:
    """The listen streams this process holds, bounded in number.

    Args:
        max_streams: open streams at most (``McpSettings.listen_max_streams``).
        buffer_size: notifications queued per stream at most (``McpSettings.stream_buffer_size``).
        max_per_owner: open streams of one authenticated owner at most (None: no quota;
            anonymous streams, ``owner=None``, only count towards ``max_streams``).
    """

    def __init__(self, *, max_streams: int, buffer_size: int, max_per_owner: int | None = None) -> None:
        self._max_per_owner = max_per_owner
        self._max = max_streams
        self._buffer = buffer_size
        self._streams: set[ListenStream] = set()
        self._closed_on: object | None = None  # the event loop of the server run that closed the hub
        self._idle: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self._streams)

    def open(
        self,
        request_id: RequestId,
        listen_filter: ListenFilter,
        *,
        tenant_id: str | None = "default",
        owner: str | None = None,
        task_owner: str | None = None,
    ) -> ListenStream:
        """Register a new stream of ``tenant_id`` / ``owner`` (finished at once when its filter is empty).

        Raises:
            StateUnavailableError: shutting down, or ``max_streams`` streams are open, or
                ``max_per_owner`` of this owner (HTTP 503 with ``Retry-After``).
        """
        if self._closed_on is not None and self._closed_on is _running_loop():
            raise StateUnavailableError("The server is shutting down; listen again (another replica will answer)", retry_after=1)
        if len(self._streams) >= self._max:
            raise StateUnavailableError(
                f"Too many open subscriptions/listen streams (limit {self._max}); retry later", retry_after=5, reason="too_many_streams"
            )
        limit = self._max_per_owner
        if owner is not None and limit is not None and sum(1 for s in self._streams if s.owner == owner) >= limit:
            raise StateUnavailableError(
                f"Too many open subscriptions/listen streams for this caller (owner {owner!r} holds its quota of {limit}); "
                "close one first",
                retry_after=5,
                reason="too_many_streams",
            )
        stream = ListenStream(request_id, listen_filter, self._buffer, tenant_id=tenant_id, owner=owner, task_owner=task_owner)
        self._streams.add(stream)
        if listen_filter.empty:
            stream.finish("closed")
        return stream

    def release(self, stream: ListenStream) -> None:
        """Forget a stream whose response ended."""
        self._streams.discard(stream)
        if not self._streams and self._idle is not None:
            self._idle.set()

    def deliver(self, message: Mapping[str, Any]) -> int:
        """Offer ``message`` to every stream; returns how many queued it."""
        return sum(stream.offer(message) for stream in tuple(self._streams))

    async def close(self, grace_seconds: float) -> None:
        """End every stream gracefully and wait (at most ``grace_seconds``) for their final answers;
        later listen requests of this server run (this event loop) get 503; a new run (another
        loop: the next lifespan, the next test) opens streams again."""
        self._closed_on = _running_loop()
        if not self._streams:
            return
        self._idle = anyio.Event()
        for stream in tuple(self._streams):
            stream.finish("closed")
        with anyio.move_on_after(grace_seconds):
            await self._idle.wait()


class ListenResponse(Response):
    """The SSE response of one ``subscriptions/listen`` request (see the module docstring).

    Args:
        stream: the stream's queue, from :meth:`ListenHub.open`.
        hub: released when the response ends.
        keepalive_seconds: a ``: keep-alive`` comment after this many idle seconds.
        headers: extra response headers.
    """

    def __init__(
        self,
        stream: ListenStream,
        hub: ListenHub,
        *,
        keepalive_seconds: float,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._stream = stream
        self._hub = hub
        self._keepalive = keepalive_seconds
        self.status_code = 200
        self.background: BackgroundTask | BackgroundTasks | None = None
        self.init_headers({**SSE_HEADERS, **(headers or {}), "content-type": "text/event-stream"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = self._stream
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": sse_frame(stream.acknowledgement()), "more_body": True})
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    stream.finish("disconnected")
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                await self._pump(send)
                tg.cancel_scope.cancel()
            final = stream.final_message()
            if final is not None:
                await send({"type": "http.response.body", "body": sse_frame(final), "more_body": False})
        finally:
            stream.finish("disconnected")  # no-op unless the response was cut short
            self._hub.release(stream)
        if self.background is not None:
            await self.background()

    async def _pump(self, send: Send) -> None:
        stream = self._stream
        while True:
            message: dict[str, Any] | None = None
            with anyio.move_on_after(self._keepalive) as idle:
                try:
                    message = await stream.messages.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return
            if idle.cancelled_caught or message is None:
                await send({"type": "http.response.body", "body": b": keep-alive\r\n\r\n", "more_body": True})
                continue
            if stream.end == "overflow":
                return  # the client is too far behind: skip what is queued, answer the error now
            await send({"type": "http.response.body", "body": sse_frame(message), "more_body": True})
