"""What serving one request yields, before any transport sends it.

A :class:`~fastapi_mcp_ctx._transport.streams.Reply` is final (a JSON-RPC message and its HTTP status:
:func:`reply_status` is the one rule of both eras, :func:`error_reply` makes one of an error,
:func:`json_reply` answers it over HTTP); a :class:`PreparedCall` is a handler ready to run,
which the transport (HTTP, stdio, a batch) runs with its own stream and cancellation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fastapi.background import BackgroundTasks
from starlette.responses import Response

from .._context.call_state import CallState
from .._context.cancel_signal import CancelSignal
from .._transport.streams import SSE_HEADERS, Reply, Runner, sse_frame
from .._wire.jsonrpc import RequestId, dumps, error_message
from ..errors import (
    AuthenticationError,
    ConfigurationError,
    InvalidRequestError,
    McpError,
    PermissionDeniedError,
    StateUnavailableError,
)

__all__ = ["PreparedCall", "error_reply", "json_reply", "reply_status"]


def reply_status(exc: McpError, era: str) -> int:
    """HTTP status of a JSON-RPC error: mapped in 2026; in 2025 200, except for request-shape
    (-32600), authentication and availability errors (a 2025 client reads 404 as "session gone").
    A misconfigured server is 500 in both eras: the operator must act, a retry does not help."""
    if isinstance(exc, ConfigurationError):
        return exc.http_status
    if era == "modern" or isinstance(
        exc, (AuthenticationError, PermissionDeniedError, StateUnavailableError, InvalidRequestError)
    ):
        return 200 if exc.http_status == 500 else exc.http_status
    return 200


def error_reply(request_id: RequestId | None, exc: McpError, era: str) -> Reply:
    """The :class:`Reply` carrying ``exc`` as a JSON-RPC error."""
    return Reply(error_message(request_id, exc), reply_status(exc, era), exc.headers)


def json_reply(reply: Reply, headers: Mapping[str, str] | None = None, *, json_ok: bool = True) -> Response:
    """The response of ``reply``: ``application/json``, or one SSE event when the client's
    ``Accept`` admits ``text/event-stream`` only."""
    if not json_ok:
        return Response(sse_frame(reply.message), reply.status, {**SSE_HEADERS, **(headers or {}), **reply.headers}, media_type="text/event-stream")
    return Response(dumps(reply.message), reply.status, {**(headers or {}), **reply.headers}, media_type="application/json")


@dataclass(slots=True)
class PreparedCall:
    """A ``tools/call`` ready to run on any transport.

    ``runner(outbound)`` runs the tool and returns its final :class:`Reply` (``outbound``
    carries the call's notifications); ``signal`` cancels it; ``background`` runs after the
    result is sent; ``cancelled_message()`` is what HTTP sends after a client cancel (2025: -32800)
    or once the shutdown grace ran out (503); ``state`` is the call's state (the transport sets
    its ``stream_control``). Not frozen: telemetry swaps ``runner`` for its wrapper in place (a
    frozen dataclass's ``__init__`` costs four times a plain one's, on every call).
    """

    runner: Runner
    signal: CancelSignal
    background: BackgroundTasks
    cancelled_message: Callable[[], Reply | None]
    state: CallState | None = None
