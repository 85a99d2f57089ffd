"""The members of :class:`~fastapi_mcp_ctx.context.Context` that send something: progress,
notifications on the call's stream, change notifications to every client, server→client
requests, and the end of an SSE connection.

:class:`CallMessages` (a base of ``Context``) keeps their documentation and delegates to
:mod:`fastapi_mcp_ctx._context.outbound` (the call's own stream) and to what the transport plugged
into the :class:`~fastapi_mcp_ctx._context.call_state.CallState` (``notifications``, ``back_channel``,
``stream_control``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._bridge import bridged
from ..errors import NoBackChannelError
from . import outbound as _call_outbound
from .call_view import CallView

__all__ = ["CallMessages"]


class CallMessages(CallView):
    """Outbound members of ``Context`` (a mixin: no slots of its own)."""

    __slots__ = ()

    @bridged("ctx.report_progress")
    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Send ``notifications/progress`` on this call's own stream.

        A no-op (returns False) when the request has no ``progressToken``, the call was
        cancelled, or ``progress`` does not increase (the spec requires it to increase).
        Spec 2025-11-25 ``basic/utilities/progress``.

        Args:
            progress: progress so far (any unit; must increase on every call).
            total: total in the same unit, if known.
            message: human-readable status.
        Returns:
            True when the notification was handed to the stream.
        Raises:
            ValueError: ``progress`` or ``total`` is ``inf`` or ``nan`` (not a JSON number,
                RFC 8259 §6), checked before anything else (with or without a progress token).
        """
        return await _call_outbound.report_progress(self._call, progress, total, message)

    @bridged("ctx.notify")
    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send any notification on this call's stream (dropped when there is none)."""
        await _call_outbound.notify(self._call, method, params)

    @bridged("ctx.notify_tools_list_changed")
    async def notify_tools_list_changed(self) -> None:
        """Tell every client that the tool list changed (``notifications/tools/list_changed``).

        Not on this call's stream: 2025 sessions get it on their GET stream, 2026 clients on
        their ``subscriptions/listen`` streams that asked for it, on every replica. A no-op
        when the context is not served by a router.

        Best effort: when the replica bus cannot be reached (Redis down or full) the loss is
        logged at WARNING and the call goes on (its work is done: a failed call would invite a
        retry that repeats it); ``await mcp_router.notify_tools_list_changed()`` outside a
        request raises :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` instead.

        Raises:
            RuntimeError: the router did not declare ``list_changed={"tools", ...}``.
        """
        if self._call.notifications is not None:
            await _call_outbound.publish_change(self._call.notifications.list_changed("tools"), "notifications/tools/list_changed")

    @bridged("ctx.notify_prompts_list_changed")
    async def notify_prompts_list_changed(self) -> None:
        """Like :meth:`notify_tools_list_changed`, for prompts (needs ``list_changed={"prompts"}``)."""
        if self._call.notifications is not None:
            await _call_outbound.publish_change(self._call.notifications.list_changed("prompts"), "notifications/prompts/list_changed")

    @bridged("ctx.notify_resources_list_changed")
    async def notify_resources_list_changed(self) -> None:
        """Like :meth:`notify_tools_list_changed`, for resources (needs ``list_changed={"resources"}``)."""
        if self._call.notifications is not None:
            await _call_outbound.publish_change(
                self._call.notifications.list_changed("resources"), "notifications/resources/list_changed"
            )

    @bridged("ctx.notify_resource_updated")
    async def notify_resource_updated(self, uri: str) -> None:
        """Send ``notifications/resources/updated {uri}`` to the clients subscribed to ``uri`` only
        (2025: sessions that called ``resources/subscribe``; 2026: listen streams naming it).

        Best effort, as :meth:`notify_tools_list_changed`.

        Raises:
            RuntimeError: the router did not declare ``resources_subscribe=True``.
            TypeError: ``uri`` is not a non-empty string.
        """
        if self._call.notifications is not None:
            await _call_outbound.publish_change(self._call.notifications.resource_updated(uri), "notifications/resources/updated")

    @bridged("ctx.send_request")
    async def send_request(self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None) -> dict[str, Any]:
        """Send a JSON-RPC request to the client on this call's own stream; return its ``result``.

        2025 era (spec 2025-11-25 ``basic/transports`` §Sending Messages item 6). ``ping`` is
        always allowed; ``roots/list``, ``sampling/createMessage`` and ``elicitation/create``
        need the capability the client declared (rules: ``fastapi_mcp_ctx._transport.requests``).
        Failures no wait could cure are raised at once, before anything is sent.

        Args:
            method / params: the request (params checked against the negotiated version's schema).
            timeout: seconds to wait for the answer (default ``MCP_SERVER_REQUEST_TIMEOUT_SECONDS``).
        Returns:
            The client's ``result`` object.
        Raises:
            NoBackChannelError: nothing can carry the request (2026 era, no session, JSON-only
                Accept, the call or session ended). MissingCapabilityError: not declared.
            ClientResponseError: the client answered an error. ServerRequestTimeoutError: no
                answer in time (``notifications/cancelled`` sent). ValueError: bad method/params/timeout.
        """
        channel = self._call.back_channel
        if channel is None:
            raise NoBackChannelError(method, "this call was not served by a transport that carries server→client requests")
        seconds = self._call.settings.server_request_timeout_seconds if timeout is None else timeout
        return await channel.send_request(self._call, method, dict(params) if params is not None else None, seconds)

    @bridged("ctx.close_sse_stream")
    async def close_sse_stream(self) -> bool:
        """End this call's SSE *connection*, not its stream: the client resumes with ``GET`` +
        ``Last-Event-ID`` after the ``retry`` it was told, and gets every message the call sends
        meanwhile, its result included. The call keeps running. Use it to poll a long call
        instead of holding one connection open (spec 2025-11-25 ``basic/transports`` §Sending
        Messages item 6).

        Returns:
            True when a connection was closed. False (nothing happens) in the 2026 era, for
            clients before 2025-11-25, without a session, with ``MCP_HTTP_RESUMABILITY=false``,
            or for a client that accepts only JSON.
        """
        control = self._call.stream_control
        return control is not None and await control.close_connection()

    @bridged("ctx.close_standalone_sse_stream")
    async def close_standalone_sse_stream(self) -> bool:
        """End the connection of this session's GET stream (after a ``retry`` hint); the client
        resumes it with ``Last-Event-ID`` and gets what was sent meanwhile.

        Returns:
            True when a connection was closed (same conditions as :meth:`close_sse_stream`,
            and the session's GET stream must be open).
        """
        control = self._call.stream_control
        return control is not None and await control.close_standalone()
