"""What a handler sends on its own call's stream: ``notifications/progress``, any notification,
and the ``ctx.log`` facade's ``notifications/message``.

Each function reads and updates one :class:`~fastapi_mcp_ctx._context.call_state.CallState`; nothing
is sent once the call is cancelled or when the transport gave it no stream (``outbound`` None).
The :class:`~fastapi_mcp_ctx.context.Context` members delegate here and keep the documentation.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from .._wire.jsonrpc import notification_message
from ..errors import StateUnavailableError
from .call_state import CallState
from .logger import ContextLogger

__all__ = ["call_logger", "notify", "publish_change", "report_progress", "send_if_live"]


async def report_progress(call: CallState, progress: float, total: float | None, message: str | None) -> bool:
    """``ctx.report_progress``: True when ``notifications/progress`` was handed to the stream.

    Raises:
        ValueError: ``progress`` or ``total`` is ``inf`` or ``nan``.
    """
    if not math.isfinite(progress) or (total is not None and not math.isfinite(total)):
        raise ValueError(f"progress and total must be finite numbers, got progress={progress!r}, total={total!r}")
    token = call.envelope.progress_token
    outbound = call.outbound
    if token is None or outbound is None or call.signal.cancelled:
        return False
    if call.last_progress is not None and progress <= call.last_progress:
        return False
    call.last_progress = progress
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    await outbound(notification_message("notifications/progress", params))
    return True


async def notify(call: CallState, method: str, params: dict[str, Any] | None) -> None:
    """``ctx.notify``: send a notification on the call's stream (dropped when there is none)."""
    if call.outbound is None or call.signal.cancelled:
        return
    await call.outbound(notification_message(method, params))


async def send_if_live(call: CallState, message: dict[str, Any]) -> None:
    """Send ``message`` on the call's stream unless it has none or the call was cancelled."""
    if call.outbound is not None and not call.signal.cancelled:
        await call.outbound(message)


def call_logger(call: CallState, trace_id: str | None) -> ContextLogger:
    """The ``ctx.log`` of ``call``: the server log with the call's correlation fields, and
    ``notifications/message`` at the level the client chose (2025: ``logging/setLevel``;
    2026-07-28: ``_meta``'s log level, which is also the opt-in)."""
    opted_in = call.envelope.era == "legacy" or call.envelope.log_level is not None
    level_source: Callable[[], str | None] = (
        (lambda: call.envelope.log_level) if call.envelope.era == "modern" else call.client_log_level
    )
    return ContextLogger(
        floor=call.settings.log_level,
        client_level=level_source,
        client_opted_in=opted_in,
        send=functools.partial(send_if_live, call),
        correlation={
            "request_id": call.request_id,
            "tenant_id": call.tenant_id,
            "session_id": call.session_id,
            "trace_id": trace_id,
        },
        logger_name=call.logger_name or call.settings.server_name,
        call=call,
    )


async def publish_change(publish: Awaitable[None], what: str) -> None:
    """``ctx.notify_*``: publish a change notification, best effort.

    A bus that cannot be reached (``StateUnavailableError``: Redis down or full) is logged at
    WARNING and the call goes on: the handler's work is done, and failing the call would invite
    a retry that repeats it. Programming errors (an undeclared kind, a bad URI) still raise.
    """
    try:
        await publish
    except StateUnavailableError as exc:
        logging.getLogger("fastapi_mcp_ctx").warning("%s was not published (the call goes on): %s", what, exc.message)
