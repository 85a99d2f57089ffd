"""JSON-RPC batches on a stdio connection initialized at 2025-03-26.

2025-03-26 ``basic/transports`` §stdio: a line may be "a JSON-RPC batch containing one or more
requests and/or notifications" (and its ``basic`` §Batching: MUST support receiving them). Any
other connection (a later version, the 2026 era, not initialized) keeps the single-message
refusal, as over HTTP (``_server/batch_core.py``).

Members are judged one by one (JSON-RPC 2.0 §6): an invalid one gets its own error object,
``initialize`` is refused, an id already in flight (in the batch or before it) is refused,
responses go to the pending table and notifications are acted on in array order. The requests
then run concurrently (as separate lines would), each under its own cancel signal in the
connection's in-flight table, so ``notifications/cancelled`` and end-of-input draining treat
them like any request. Their notifications (progress, ``ctx.log``) go out as they come; when
the last request is done, one line carries the array of the answers in array order. A
cancelled request is not answered (``basic/utilities/cancellation``), and a batch left with no
answer writes nothing (JSON-RPC 2.0 §6: never an empty array).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup
from starlette.background import BackgroundTasks
from starlette.requests import Request

from .._context.cancel_signal import CancelSignal
from .._server.batch_core import array_of, run_call, split_batch
from .._server.dispatch import Dispatcher
from .._server.outcomes import PreparedCall
from .._transport.pending import PendingRequests
from .._transport.requests import BackChannel
from .._transport.sessions import SessionRecord
from .._wire.envelope import RequestEnvelope
from .._wire.jsonrpc import (
    JsonRpcNotification,
    JsonRpcRequest,
    JsonRpcResponse,
    RequestId,
    error_message,
    parse_message,
    request_id_of,
)
from ..errors import InvalidRequestError, McpError

__all__ = ["StdioBatchHooks", "serve_stdio_batch", "take_non_request"]

logger = logging.getLogger("fastapi_mcp_ctx.stdio")

Send = Callable[[dict[str, Any] | bytes], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class StdioBatchHooks:
    """What a batch needs of its :class:`~fastapi_mcp_ctx._stdio.session.StdioSession`: the
    dispatcher, the pending table, the in-flight table, ``send`` (a message, or a line's bytes),
    the request envelope, the synthetic ``Request`` of a body, the notification handler."""

    dispatcher: Dispatcher
    pending: PendingRequests
    in_flight: dict[RequestId, CancelSignal]
    send: Send
    envelope: Callable[[JsonRpcRequest], RequestEnvelope]
    make_request: Callable[[bytes], Request]
    notified: Callable[[JsonRpcNotification], None]


def take_non_request(
    message: JsonRpcResponse | JsonRpcNotification, pending: PendingRequests, notified: Callable[[JsonRpcNotification], None]
) -> None:
    """A line's (or a batch member's) response answers the server→client request it names; a
    notification goes to ``notified``. Neither is answered."""
    if isinstance(message, JsonRpcResponse):
        if not pending.resolve(message):
            logger.debug("stdio: ignored a response to an unknown request id %r", message.id)
        return
    notified(message)


@dataclass(slots=True)
class _Member:
    index: int
    request_id: RequestId
    message: JsonRpcRequest
    body: bytes
    envelope: RequestEnvelope
    signal: CancelSignal


async def serve_stdio_batch(hooks: StdioBatchHooks, record: SessionRecord, line: bytes, limit: int, requests: TaskGroup) -> None:
    """Serve the batch ``line`` of a 2025-03-26 connection: judge its members now, start its
    requests in ``requests`` (the connection's task group) and return (reading goes on).

    ``limit``: ``MCP_MAX_BATCH_SIZE``. Invalid JSON, ``[]`` or more than ``limit`` members is
    one error line (-32700 / -32600), nothing runs.
    """
    try:
        members = split_batch(line, limit)
    except McpError as exc:
        await hooks.send(error_message(None, exc))
        return
    answers: list[dict[str, Any] | None] = [None] * len(members)
    started: list[_Member] = []
    for index, body in enumerate(members):
        try:
            message = parse_message(body)
        except McpError as exc:
            answers[index] = error_message(request_id_of(exc), exc)
            continue
        if not isinstance(message, JsonRpcRequest):
            take_non_request(message, hooks.pending, hooks.notified)
            continue
        if message.method == "initialize":
            refused = InvalidRequestError("Invalid Request: initialize must not be part of a JSON-RPC batch (2025-03-26 basic/lifecycle)")
            answers[index] = error_message(message.id, refused)
            continue
        if message.id in hooks.in_flight:
            answers[index] = error_message(message.id, InvalidRequestError(f"Request id {message.id!r} is already in flight"))
            continue
        try:
            envelope = hooks.envelope(message)
        except McpError as exc:
            answers[index] = error_message(message.id, exc)
            continue
        signal = hooks.in_flight[message.id] = CancelSignal()
        started.append(_Member(index, message.id, message, body, envelope, signal))
    if not started:
        data = array_of(answers)
        if data is not None:
            await hooks.send(data)
        return
    requests.start_soon(_run_batch, hooks, record, started, answers)


async def _run_batch(hooks: StdioBatchHooks, record: SessionRecord, started: list[_Member], answers: list[dict[str, Any] | None]) -> None:
    after: list[BackgroundTasks] = []
    async with anyio.create_task_group() as members:
        for member in started:
            members.start_soon(_run_member, hooks, record, member, answers, after)
    data = array_of(answers)
    if data is not None:
        await hooks.send(data)
    for background in after:
        try:
            await background()
        except Exception:
            logger.exception("stdio: a background task of a batch failed")


async def _run_member(
    hooks: StdioBatchHooks, record: SessionRecord, member: _Member, answers: list[dict[str, Any] | None], after: list[BackgroundTasks]
) -> None:
    signal = member.signal

    async def outbound(message: dict[str, Any]) -> None:
        if not signal.cancelled:
            await hooks.send(message)

    try:
        channel = BackChannel.connection(hooks.pending, era="legacy")  # ctx.send_request: on this connection
        outcome = await hooks.dispatcher.serve(
            member.message, member.envelope, hooks.make_request(member.body), record, http_headers=False, signal=signal, back_channel=channel
        )
        if isinstance(outcome, PreparedCall):
            reply = await run_call(outcome, outbound)
            if outcome.background.tasks:
                after.append(outcome.background)
        else:
            reply = outcome
        if reply is not None and not signal.cancelled:  # a cancelled request is never answered
            answers[member.index] = reply.message
    except Exception:  # the dispatcher answers every failure; this guards the batch itself
        logger.exception("stdio: serving batch member %r failed", member.request_id)
    finally:
        hooks.in_flight.pop(member.request_id, None)
