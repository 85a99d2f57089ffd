"""One handler call made ready to run: its ``CallState`` and ``Context``, and the runner that
turns the handler's result or failure into the call's reply (the dispatcher's tools, resources,
prompts and completions all go through :meth:`CallPreparation._prepare`).

The reply rules: the era's error for a protocol error; a 2025 tool's missing client
capability is an ``isError`` result naming it; a crash is logged with its traceback and
answered ``-32603``; a cancelled call answers per era (2025: ``RequestCancelledError``; 2026:
nothing), a shutdown's ``ServerShuttingDownError`` in both.
"""

from __future__ import annotations

import logging
from asyncio import get_running_loop
from collections.abc import Callable
from functools import partial
from typing import Any

from fastapi.background import BackgroundTasks
from starlette.requests import Request

from .._auth.sealing import RequestStateSealer
from .._bridge import CallCancelled, report_unawaited
from .._context.call_state import CallState
from .._context.cancel_signal import CancelSignal
from .._context.event_loop import LOOP_SCOPE_KEY
from .._fastapi_routes import LEAN_SCOPE_KEY
from .._handlers.invocation import Run
from .._handlers.results import error_result, merge_outputs
from .._handlers.tool_def import ToolDef
from .._transport.notifications import Notifier
from .._transport.requests import BackChannel
from .._transport.sessions import LiveSession, LiveSessions, SessionRecord, new_session_id
from .._transport.shutdown import SHUTDOWN_REASON, ShutdownCoordinator
from .._transport.streams import Outbound, Reply
from .._wire.envelope import HeaderMap, RequestEnvelope
from .._wire.jsonrpc import JsonRpcRequest, error_message, result_message
from ..auth import Principal
from ..context import Context
from ..contracts import ErrorContracts
from ..errors import (
    InputRoundsExceededError,
    InternalError,
    InvalidRequestError,
    McpError,
    MissingCapabilityError,
    RequestCancelledError,
    ServerRequestError,
    ServerShuttingDownError,
)
from ..input_required import InputRequired
from ..settings import McpSettings
from ..state import ContextState
from .http import BODY_SCOPE_KEY, HEADERS_SCOPE_KEY, replaying_receive
from .input_rounds import failed_round, first_round, later_rounds
from .outcomes import PreparedCall, error_reply

__all__ = ["PRINCIPAL_SCOPE_KEY", "CallPreparation", "echo"]

logger = logging.getLogger("fastapi_mcp_ctx")

PRINCIPAL_SCOPE_KEY = "fastapi_mcp_ctx.principal"
_ECHO_LIMIT = 256


def _report_unawaited(state: CallState, result: dict[str, Any] | None, tool: ToolDef | None) -> None:
    """Log the Context coroutines the handler never awaited (``_bridge``); in development
    (``MCP_DEBUG`` or ``FastAPI(debug=True)``) a tool's ``result`` also gets the report as its
    last text block."""
    handler = f"tool {tool.name!r}" if tool is not None else (state.operation or state.method)
    text = report_unawaited(state, handler, state.request_id)
    if text is None or result is None or tool is None or not isinstance(result.get("content"), list):
        return
    if state.settings.debug or getattr(state.request.scope.get("app"), "debug", False):
        result["content"].append({"type": "text", "text": f"[development] {text}"})


def echo(value: str) -> str:
    """A client-supplied name echoed in an error, bounded to 256 characters."""
    return value if len(value) <= _ECHO_LIMIT else value[:_ECHO_LIMIT] + "…"


def _log_level_of(session: SessionRecord) -> str | None:
    """A session's client log level, as it is when read (``logging/setLevel`` changes it)."""
    return session.log_level


def _no_log_level() -> str | None:
    """A sessionless call's client log level: none was set."""
    return None


class CallPreparation:
    """The call-preparing half of the ``Dispatcher`` (a base class: the dispatcher's fields
    below are read, never set here)."""

    __slots__ = ()
    settings: McpSettings
    live: LiveSessions
    state_factory: Callable[[str | None], ContextState] | None
    notifier: Notifier | None
    shutdown: ShutdownCoordinator | None
    sealer: RequestStateSealer | None

    def _finish(self, result: dict[str, Any], envelope: RequestEnvelope, *, cacheable: bool = False) -> dict[str, Any]:
        raise NotImplementedError  # the Dispatcher's: resultType, cache hints, serverInfo (2026 only: a 2025 result is left as it is)

    def _prepare(
        self,
        message: JsonRpcRequest,
        envelope: RequestEnvelope,
        request: Request,
        session: SessionRecord | None,
        signal: CancelSignal,
        back_channel: BackChannel | None,
        *,
        run: Run,
        operation: str,
        logger_name: str,
        private_scope: bool,
        tool: ToolDef | None = None,
        uri: str | None = None,
        cacheable: bool = False,
        contracts: ErrorContracts | None = None,
    ) -> PreparedCall:
        """The :class:`PreparedCall` of one handler call (``tools/call``, ``resources/read``,
        ``prompts/get``, ``completion/complete``): its ``CallState`` and ``Context``, and a
        runner turning ``run``'s result or failure into the reply."""
        background = BackgroundTasks()
        # The solver stores the call's exit stacks in the scope: a handler with dependencies gets
        # a private scope copy unless its request is a lean route's (LEAN_SCOPE_KEY: one HTTP
        # request, or one batch member's own copy, carrying this call only; no route-level solve
        # keeps stacks there). The body was read already: the call's request replays it, so
        # ``await request.body()`` works in a tool.
        scope = request.scope
        if private_scope and LEAN_SCOPE_KEY not in scope:
            scope = dict(scope)
            call_request = Request(scope, replaying_receive(scope.get(BODY_SCOPE_KEY, b""), request.receive))
        else:  # the request itself, its receive replaying the body: no second Request of the same scope
            call_request = request
            request._receive = replaying_receive(scope.get(BODY_SCOPE_KEY, b""), request.receive)  # pyright: ignore[reportPrivateUsage]
        if private_scope:
            headers: HeaderMap | None = scope.get(HEADERS_SCOPE_KEY)  # the route's screen read them
            if headers is not None and "cookie" not in headers:  # the solver reads request.cookies: none
                vars(call_request)["_cookies"] = {}
        principal: Principal | None = request.scope.get(PRINCIPAL_SCOPE_KEY)
        if session is not None:
            session_id: str | None = session.id
        elif envelope.era == "legacy" and self.settings.expose_stateless_session_id:  # a fresh token per 2025 request (2026: none)
            session_id = new_session_id()
        else:
            session_id = None
        state = CallState(
            request_id=message.id,
            method=message.method,
            envelope=envelope,
            settings=self.settings,
            request=call_request,
            auth=principal,
            tenant_id=principal.tenant_id if principal is not None else "default",
            session_id=session_id,
            operation=operation,
            logger_name=logger_name,
            uri=uri,
            client_log_level=partial(_log_level_of, session) if session is not None else _no_log_level,
            state_factory=self.state_factory,
            notifications=self.notifier,
            signal=signal,
        )
        state.back_channel = back_channel
        if tool is not None and (tool.enrichment is not None or tool.contracts is not None):  # enrichment=, errors=: ctx.enrich, ctx.fail
            state.enrichment, state.contracts = tool.enrichment, tool.contracts
        elif contracts is not None:  # a resource's or prompt's errors=: ctx.fail
            state.contracts = contracts
        context = Context(state)
        # registered last: nothing after it raises, so every registered call reaches call_ended
        live = self.live.call_started(session.id, message.id, state.signal) if session is not None else None
        if live is None and session is not None:
            raise InvalidRequestError(f"Request id {echo(repr(message.id))} is already in flight in this session")
        # partials of module functions, not closures: no cell per captured name, no function
        # object per call; the runner reads the rest from the call's state
        runner = partial(_run_call, self, state, context, run, background, message.params, tool, cacheable, live)
        return PreparedCall(runner, signal, background, partial(_cancelled, state), state)


async def _run_call(
    prep: CallPreparation,
    state: CallState,
    context: Context,
    run: Run,
    background: BackgroundTasks,
    params: dict[str, Any],
    tool: ToolDef | None,
    cacheable: bool,
    live: LiveSession | None,
    outbound: Outbound,
) -> Reply | None:
    """The runner of a prepared call: ``run`` (the handler) with the input rounds, its result
    or failure made the reply (module docstring)."""
    state.outbound = outbound
    signal = state.signal
    call_request = state.request
    # a sync tool's ctx.log.info(...) / ctx.signal.wait() run here (_bridge); the endpoint's loop, asked once
    state.loop = signal.loop = call_request.scope.get(LOOP_SCOPE_KEY) or get_running_loop()
    shutdown = prep.shutdown
    if shutdown is not None:
        shutdown.call_started(signal)
    request_id = state.request_id
    try:
        try:  # the input rounds (_server.input_rounds): the first attempt here, the later ones only when it asks
            try:
                if "inputResponses" in params or "requestState" in params:  # most calls: no answer to admit, no state to open
                    state.input_round = first_round(context, state, params, prep.sealer)
                result = await run(context, call_request, background)
            except InputRequired as asked:
                result = await later_rounds(context, state, params, partial(run, context, call_request, background), asked, prep.sealer)
        except (ServerRequestError, InputRoundsExceededError) as exc:  # in any attempt: one conversion
            result = failed_round(exc, request_id, tool)
        if tool is not None and (state.outputs is not None or tool.enrichment is not None) and result.get("resultType") != "input_required":
            result = merge_outputs(tool, result, state.outputs, request_id)  # ctx.enrich / ctx.content
        if state.created is not None:  # Context coroutines made on the loop: any never awaited is reported
            _report_unawaited(state, result, tool)
        envelope = state.envelope
        if envelope.era == "modern":  # a 2025 result is sent as it is (_finish adds 2026's fields only)
            result = prep._finish(result, envelope, cacheable=cacheable)  # pyright: ignore[reportPrivateUsage]
        reply = Reply(result_message(request_id, result))
    except CallCancelled:  # a sync handler's thread: the call was cancelled (the transport answers it) or ended
        reply = error_reply(request_id, RequestCancelledError(), state.envelope.era)
    except Exception as exc:  # noqa: BLE001 - every failure is the call's reply
        reply = _failure(exc, state, tool)
    finally:  # (no return inside the try: fewer copies of this block in the bytecode)
        if state.created is not None:  # the handler failed: the server log still names what it never awaited
            _report_unawaited(state, None, tool)
        state.outbound = None
        signal.release()  # work a thread of the handler's still runs on the loop ends with the call
        if shutdown is not None:
            shutdown.call_ended(signal)
        if live is not None:
            prep.live.call_ended(live, state.session_id, request_id, signal)  # pyright: ignore[reportArgumentType]
    return reply


def _failure(exc: Exception, state: CallState, tool: ToolDef | None) -> Reply:
    """The reply of a call whose handler raised ``exc`` (called in its ``except``: a crash is
    logged with its traceback)."""
    request_id, era = state.request_id, state.envelope.era
    if isinstance(exc, MissingCapabilityError) and era != "modern" and tool is not None:
        exc.recovery_hint = "Reconnect with a client that declares it."
        return Reply(result_message(request_id, error_result(exc, request_id, tool)))
    if isinstance(exc, McpError):
        return error_reply(request_id, exc, era)
    logger.exception("internal error in %s (request id %r)", state.operation, request_id)
    return error_reply(request_id, InternalError(), era)


def _cancelled(state: CallState) -> Reply | None:
    """What HTTP sends for a cancelled call: the shutdown's error, else per era (2025:
    ``RequestCancelledError``; 2026: nothing)."""
    if state.signal.reason == SHUTDOWN_REASON:
        return error_reply(state.request_id, ServerShuttingDownError(), state.envelope.era)
    if state.envelope.era == "modern":
        return None
    return Reply(error_message(state.request_id, RequestCancelledError()))
