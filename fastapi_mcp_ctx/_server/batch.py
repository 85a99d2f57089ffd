"""JSON-RPC batches over Streamable HTTP, for sessions negotiated at 2025-03-26.

Which versions batch and how members are judged: ``_server/batch_core.py``. Here the HTTP side
(2025-03-26 ``basic/transports`` §Sending Messages): an array is served only in a session
(``Mcp-Session-Id``) whose negotiated version is 2025-03-26; a later version, the 2026 era, a
request without a session (its version cannot be told) or stateless mode keep the
single-message refusal (-32600, HTTP 400). In such a session :func:`serve_batch` answers:

* invalid JSON: one -32700 error (not an array); ``[]``: one -32600 error; more members than
  ``MCP_MAX_BATCH_SIZE``: one -32600 error naming the bound (HTTP 400); ``MCP_MAX_BODY_BYTES``
  bounds the body as for any POST;
* each member is judged alone by ``parse_message`` (an invalid member, ``[1]``, a bad
  ``params``, a duplicate key: its own error object, the id echoed when readable); an
  ``initialize`` member is refused (2025-03-26 ``basic/lifecycle``: initialize MUST NOT be part
  of a batch), so is a second request with an id already used in the batch;
* notifications (``notifications/cancelled``...) and responses (answers to ``ctx.send_request``)
  are acted on in array order, before the requests start; a batch of only these gets 202;
* the requests run concurrently: JSON-RPC 2.0 §6 lets a server process a batch "as a set of
  concurrent tasks, processing them in any order and with any width of parallelism", and
  neither 2025-03-26 page orders them (each request could have been its own POST), so a slow
  tool does not hold up a ``ping`` beside it. The width is bounded by the batch size;
* the answer is one JSON array holding one response per request, in array order, HTTP 200
  (400 when no member was a valid request: only errors to report); a client accepting
  ``text/event-stream`` only, or a call sending a notification or a server→client request while
  the client accepts SSE, gets an SSE stream instead: each message as it comes, each response
  in its own event, the stream closed after the last (2025-03-26 ``basic/transports`` item 6).

A batch's calls are not resumable (no event ids); cancelling one member
(``notifications/cancelled`` with its id) answers it with -32800 and leaves the others running;
a client that disconnects cancels them all and is sent nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
from starlette.background import BackgroundTasks
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._context.cancel_signal import CancelSignal
from .._transport.requests import BackChannel
from .._transport.sessions import SessionRecord
from .._transport.streams import SSE_HEADERS, Reply, run_background, sse_frame
from .._wire.envelope import HeaderMap, RequestEnvelope, check_legacy_version, choose_era, read_legacy_envelope
from .._wire.jsonrpc import (
    JsonRpcNotification,
    JsonRpcRequest,
    JsonRpcResponse,
    RequestId,
    error_message,
    parse_message,
    request_id_of,
)
from ..errors import InvalidRequestError, MalformedAnswerError, McpError
from ..settings import McpSettings
from .batch_core import BATCH_VERSION, array_of, refusal, run_call, split_batch
from .dispatch import JSON_OK_SCOPE_KEY, Dispatcher
from .http import BODY_SCOPE_KEY, reject_repeated
from .outcomes import PreparedCall

__all__ = ["BatchHooks", "BatchResponse", "serve_batch"]

_SESSION_HEADER: Final = "mcp-session-id"


@dataclass(frozen=True, slots=True)
class BatchHooks:
    """What :func:`serve_batch` needs of the endpoint: its settings and dispatcher, the session
    lookup (``session(headers, scope)``: raises the 400/404 of a missing or unknown session),
    the delivery of a client's answer (``deliver(response, session_id)``) and the handling of a
    client notification (``notified(notification, session)``)."""

    settings: McpSettings
    dispatcher: Dispatcher
    session: Callable[[HeaderMap, Scope], Awaitable[SessionRecord]]
    deliver: Callable[[JsonRpcResponse, str | None], Awaitable[bool]]
    notified: Callable[[JsonRpcNotification, SessionRecord], Awaitable[None]]


async def serve_batch(hooks: BatchHooks, request: Request, headers: HeaderMap, sse_allowed: bool) -> Response:
    """Serve the batch array POSTed in ``request`` (body in ``scope[BODY_SCOPE_KEY]``), or refuse it.

    Returns:
        202 (only notifications / responses), a JSON array (200; 400 when every member was
        invalid) or a :class:`BatchResponse` (runs the calls; JSON array or SSE).
    Raises:
        InvalidRequestError: batches are not served here (not a 2025-03-26 session), the array
            is empty or too large (-32600, HTTP 400); MissingSessionError /
            SessionNotFoundError (a session id that names no session of the caller);
            ParseError (-32700); UnsupportedVersionHeaderError (a bad MCP-Protocol-Version).
    """
    body: bytes = request.scope[BODY_SCOPE_KEY]
    if headers.repeated:
        reject_repeated(headers.repeated)
    if hooks.settings.session_mode == "stateless" or _SESSION_HEADER not in headers or choose_era(headers, None) == "modern":
        raise refusal(body)
    check_legacy_version(headers)
    session = await hooks.session(headers, request.scope)
    if session.protocol_version != BATCH_VERSION:
        raise refusal(body)
    members = split_batch(body, hooks.settings.max_batch_size)
    answers: list[dict[str, Any] | None] = [None] * len(members)
    calls: list[tuple[int, JsonRpcRequest, bytes]] = []
    seen: set[RequestId] = set()
    for index, member in enumerate(members):
        try:
            message = parse_message(member)
        except MalformedAnswerError as exc:  # it still fails the request waiting for its id
            failed = {"code": -32600, "message": f"The client's answer was malformed: {exc.message}"}
            await hooks.deliver(JsonRpcResponse(exc.answer_id, None, failed), session.id)
            answers[index] = error_message(request_id_of(exc), exc)
            continue
        except McpError as exc:
            answers[index] = error_message(request_id_of(exc), exc)
            continue
        if isinstance(message, JsonRpcResponse):
            await hooks.deliver(message, session.id)
        elif isinstance(message, JsonRpcNotification):
            await hooks.notified(message, session)
        elif message.method == "initialize":
            refused = InvalidRequestError("Invalid Request: initialize must not be part of a JSON-RPC batch (2025-03-26 basic/lifecycle)")
            answers[index] = error_message(message.id, refused)
        elif message.id in seen:
            refused = InvalidRequestError(f"Invalid Request: request id {message.id!r} is used twice in this batch")
            answers[index] = error_message(message.id, refused)
        else:
            seen.add(message.id)
            calls.append((index, message, member))
    reply_headers = {_SESSION_HEADER: session.id}
    if not calls:
        errors = array_of(answers)
        if errors is None:
            return Response(status_code=202, headers=reply_headers)
        return Response(errors, 400, reply_headers, media_type="application/json")
    json_ok: bool = request.scope.get(JSON_OK_SCOPE_KEY, True)
    return BatchResponse(hooks.dispatcher, request, headers, session, calls, answers, reply_headers, sse_allowed=sse_allowed, json_allowed=json_ok)


class BatchResponse(Response):
    """Run a batch's requests concurrently and answer with their responses (module docstring).

    Args:
        dispatcher / request / headers / session: as for one request of the session.
        calls: ``(position, request, member JSON)`` of each valid request.
        answers: one slot per member: the error objects already known, None elsewhere.
        reply_headers: headers of the response (``Mcp-Session-Id``).
        sse_allowed / json_allowed: what the client's ``Accept`` admits.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        request: Request,
        headers: HeaderMap,
        session: SessionRecord,
        calls: Sequence[tuple[int, JsonRpcRequest, bytes]],
        answers: list[dict[str, Any] | None],
        reply_headers: dict[str, str],
        *,
        sse_allowed: bool,
        json_allowed: bool,
    ) -> None:
        self._dispatcher, self._request, self._headers, self._session = dispatcher, request, headers, session
        self._calls, self._answers = calls, answers
        self._sse_allowed, self._json_allowed = sse_allowed, json_allowed
        self.status_code = 200
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply_headers.items()]
        self.background: BackgroundTasks | None = None
        self._send: Send | None = None
        self._sse_started = False
        self._gone = False  # the client disconnected: nothing more is sent
        self._signals: list[CancelSignal] = []
        self._sending = anyio.Lock()  # concurrent calls' notifications: one ASGI send at a time
        self._after: list[BackgroundTasks] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send = send
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._watch, receive)
            async with anyio.create_task_group() as members:
                for index, message, member in self._calls:
                    members.start_soon(self._run, index, message, member)
            outer.cancel_scope.cancel()
        self._send = None
        if self._gone:
            return  # as for a single call: a client that left gets nothing more
        answered = [answer for answer in self._answers if answer is not None]
        if self._sse_started or not self._json_allowed:
            await self._start_sse(send)
            for position, answer in enumerate(answered):
                await send({"type": "http.response.body", "body": sse_frame(answer), "more_body": position < len(answered) - 1})
            if not answered:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            payload = array_of(answered) or b"[]"  # not empty: every call left its answer
            raw = [(b"content-type", b"application/json"), *self.raw_headers, (b"content-length", str(len(payload)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": raw})
            await send({"type": "http.response.body", "body": payload, "more_body": False})
        for background in self._after:
            await run_background(background)
        await run_background(self.background)

    async def _watch(self, receive: Receive) -> None:
        """A disconnect cancels every call still running (as for a single request)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self._gone = True
        for signal in self._signals:
            signal.cancel("disconnected")

    async def _start_sse(self, send: Send) -> None:
        if not self._sse_started:
            self._sse_started = True
            raw = [(b"content-type", b"text/event-stream"), *((k.encode(), v.encode()) for k, v in SSE_HEADERS.items()), *self.raw_headers]
            await send({"type": "http.response.start", "status": 200, "headers": raw})

    async def _emit(self, message: dict[str, Any]) -> None:
        """A call's notification or server→client request: on the SSE stream (started by the
        first), or dropped when the client accepts JSON only."""
        send = self._send
        if not self._sse_allowed or send is None or self._gone:
            return
        async with self._sending:
            await self._start_sse(send)
            await send({"type": "http.response.body", "body": sse_frame(message), "more_body": True})

    async def _run(self, index: int, message: JsonRpcRequest, member: bytes) -> None:
        dispatcher, session = self._dispatcher, self._session
        scope = dict(self._request.scope)
        scope[BODY_SCOPE_KEY] = member  # a tool reading request.body() gets its own message
        call_request = Request(scope, self._request.receive)
        try:
            envelope: RequestEnvelope = read_legacy_envelope(self._headers, message.params, session.protocol_version)
        except McpError as exc:
            self._answers[index] = error_message(message.id, exc)
            return
        envelope.client_capabilities = session.client_capabilities
        envelope.client_info = session.client_info
        channel = BackChannel.http(dispatcher.pending, era="legacy", session_id=session.id, sse_allowed=self._sse_allowed)
        telemetry = dispatcher.telemetry
        span = telemetry.start(message, envelope, scope, session.id) if telemetry is not None else None
        outcome = await dispatcher.serve(message, envelope, call_request, session, back_channel=channel)
        if span is not None:
            outcome = span.bind(outcome, None if isinstance(outcome, Reply) else outcome.state)
        if isinstance(outcome, PreparedCall):
            reply = await self._call(outcome)
            if reply is None:
                return  # the client disconnected: nothing is sent for it
        else:
            reply = outcome
        self._answers[index] = reply.message

    async def _call(self, call: PreparedCall) -> Reply | None:
        signal = call.signal
        self._signals.append(signal)
        if self._gone:
            signal.cancel("disconnected")
        reply = await run_call(call, self._emit)
        if call.background.tasks:
            self._after.append(call.background)
        if signal.reason == "disconnected":
            return None
        if signal.reason is not None:  # notifications/cancelled: -32800 (a late result is dropped)
            return call.cancelled_message()
        return reply
