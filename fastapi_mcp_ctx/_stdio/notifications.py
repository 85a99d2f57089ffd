"""Change notifications on a stdio connection, in both eras.

stdio has one connection and no GET stream: the connection's output is the server's channel.

- **2025** (the connection began with ``initialize``): the session is attached to the router's
  :class:`~fastapi_mcp_ctx._transport.notifications.Notifier` as an HTTP session's GET stream
  is, so ``notify_*_list_changed()``, ``notify_resource_updated(uri)`` (to a session that
  sent ``resources/subscribe``) and ``send_notification_to_session(ctx.session_id, ...)`` reach
  stdout; spec 2025-11-25 ``server/tools`` §List Changed Notification, ``server/resources``
  §Subscriptions.
- **2026-07-28**: ``subscriptions/listen`` is served on the connection: the acknowledgement
  first, then the requested notifications, every one tagged with
  ``io.modelcontextprotocol/subscriptionId`` (``_transport.listen`` keeps the rules); a
  ``notifications/cancelled`` naming the listen request ends it unanswered; the end of the
  session (stdin closed, a signal) answers it with ``resultType: "complete"``; spec 2026-07-28
  ``basic/patterns/subscriptions``.

Notifications wait in a bounded buffer (``MCP_STREAM_BUFFER_SIZE``): a client that stops
reading stdout that long loses the 2025 feed (logged) or gets its listen request answered
``-32603 listen_buffer_overflow``, never the server's memory.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._context.cancel_signal import CancelSignal
from .._transport.listen import ListenStream
from .._transport.listen_filter import parse_filter
from .._transport.notifications import Notifier
from .._wire.jsonrpc import JsonRpcRequest, RequestId, error_message
from ..errors import McpError, MethodNotFoundError

__all__ = ["StdioNotifications"]

logger = logging.getLogger("fastapi_mcp_ctx.stdio")

Send = Callable[[dict[str, Any]], Awaitable[None]]

STDIO_TENANT = "default"
"""The tenant of the stdio caller (the local user), as ``ctx.tenant_id`` says."""


class StdioNotifications:
    """The connection's share of ``notifier``'s notifications, written with ``send``.

    Args:
        notifier: the router's notifier (None: the router publishes nothing).
        send: queues one message for the connection's output.
        buffer_size: notifications held per feed at most (``McpSettings.stream_buffer_size``).
    """

    def __init__(self, notifier: Notifier | None, send: Send, *, buffer_size: int) -> None:
        self._notifier = notifier
        self._send = send
        self._buffer_size = buffer_size
        self._detach: Callable[[], None] | None = None
        self._feed: MemoryObjectSendStream[dict[str, Any]] | None = None
        self._listens: dict[RequestId, ListenStream] = {}
        self.tenant_id: str | None = STDIO_TENANT
        """The caller's tenant: ``"default"``, or the principal's once ``authenticate=`` admitted a request."""

    # -- 2025: the session's feed -------------------------------------------------------
    async def attach_session(self, session_id: str, task_group: TaskGroup) -> None:
        """Feed the 2025 session ``session_id``'s notifications to the output until :meth:`close`."""
        notifier = self._notifier
        if notifier is None or self._detach is not None:
            return
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](self._buffer_size)
        self._feed = send
        self._detach = await notifier.attach_get_stream(self.tenant_id, session_id, send, send.close)
        task_group.start_soon(self._pump, receive)

    async def _pump(self, receive: MemoryObjectReceiveStream[dict[str, Any]]) -> None:
        async with receive:
            async for message in receive:
                await self._send(message)

    # -- 2026: subscriptions/listen -----------------------------------------------------
    async def listen(self, message: JsonRpcRequest, signal: CancelSignal) -> None:
        """Serve one ``subscriptions/listen`` until it is cancelled or the session ends.

        Errors are answered on the output: ``-32601`` when the application declared nothing to
        listen for (B52), ``-32602`` for a malformed filter, ``-32603`` (503-like) when too many
        listen streams are open.
        """
        notifier = self._notifier
        try:
            if notifier is None or not notifier.served.any:
                raise MethodNotFoundError(data={"method": message.method})
            stream = await notifier.open_listen(
                message.id, parse_filter(message.params, notifier.served), tenant_id=self.tenant_id
            )
        except McpError as exc:
            await self._send(error_message(message.id, exc))
            return
        self._listens[message.id] = stream
        try:
            await self._send(stream.acknowledgement())
            with anyio.CancelScope() as scope:
                signal.bind(scope)
                try:
                    async with stream.messages:
                        async for frame in stream.messages:
                            await self._send(frame)
                finally:
                    signal.bind(None)
            if signal.cancelled:  # notifications/cancelled: never answered (2026: MUST NOT)
                stream.finish("disconnected")
                return
            final = stream.final_message()
            if final is not None:
                await self._send(final)
        finally:
            del self._listens[message.id]
            notifier.hub.release(stream)

    # -- the end ------------------------------------------------------------------------
    def close(self) -> None:
        """The session ends: listen requests are answered ``complete`` (after what they hold),
        the 2025 feed stops."""
        for stream in tuple(self._listens.values()):
            stream.finish("closed")
        if self._detach is not None:
            self._detach()
            self._detach = None
        if self._feed is not None:
            self._feed.close()  # the pump sends what is queued, then ends
            self._feed = None
