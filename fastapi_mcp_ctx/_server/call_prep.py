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
from asyncio import AbstractEventLoop, get_running_loop
from collections.abc import Callable
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
from .._transport.sessions import LiveSessions, SessionRecord, new_session_id
from .._transport.shutdown import SHUTDOWN_REASON, ShutdownCoordinator
from .._transport.streams import Outbound, Reply
from .._wire.envelope import HeaderMap, RequestEnvelope
from .._wire.jsonrpc import JsonRpcRequest, error_message, result_message
from ..auth import Principal
from ..context import Context
from ..contracts import ErrorContracts
from ..errors import (
    InternalError,
    InvalidRequestError,
    McpError,
    MissingCapabilityError,
    RequestCancelledError,
    ServerShuttingDownError,
)
from ..settings import McpSettings
from ..state import ContextState
from .http import BODY_SCOPE_KEY, HEADERS_SCOPE_KEY, replaying_receive
from .input_rounds import run_rounds
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
        raise NotImplementedError  # the Dispatcher's: resultType, cache hints, serverInfo

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
        live = self.live.get(session.id) if session is not None else None
        if live is not None and message.id in live.in_flight:
            raise InvalidRequestError(f"Request id {echo(repr(message.id))} is already in flight in this session")
        principal: Principal | None = request.scope.get(PRINCIPAL_SCOPE_KEY)
        state = CallState(
            request_id=message.id,
            method=message.method,
            envelope=envelope,
            settings=self.settings,
            request=call_request,
            auth=principal,
            tenant_id=principal.tenant_id if principal is not None else "default",
            session_id=session.id if session is not None else self._stateless_session_id(envelope),
            operation=operation,
            logger_name=logger_name,
            uri=uri,
            client_log_level=(lambda: session.log_level) if session is not None else _no_log_level,
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
        if live is not None:
            live.in_flight[message.id] = state.signal
        era = envelope.era
        request_id = message.id

        shutdown = self.shutdown
        loop_of_request: AbstractEventLoop | None = scope.get(LOOP_SCOPE_KEY)

        async def runner(outbound: Outbound) -> Reply | None:
            state.outbound = outbound
            call_signal = state.signal
            # a sync tool's ctx.log.info(...) / ctx.signal.wait() run here (_bridge); the endpoint's loop, asked once
            state.loop = call_signal.loop = loop_of_request or get_running_loop()
            if shutdown is not None:
                shutdown.call_started(call_signal)
            try:
                result = await run_rounds(context, state, message.params, lambda: run(context, call_request, background), self.sealer, tool)
                if tool is not None and (state.outputs is not None or tool.enrichment is not None) and result.get("resultType") != "input_required":
                    result = merge_outputs(tool, result, state.outputs, request_id)  # ctx.enrich / ctx.content
                if state.created is not None:  # Context coroutines made on the loop: any never awaited is reported
                    _report_unawaited(state, result, tool)
                return Reply(result_message(request_id, self._finish(result, envelope, cacheable=cacheable)))
            except MissingCapabilityError as exc:
                if era == "modern" or tool is None:
                    return error_reply(request_id, exc, era)
                exc.recovery_hint = "Reconnect with a client that declares it."
                return Reply(result_message(request_id, error_result(exc, request_id, tool)))
            except McpError as exc:
                return error_reply(request_id, exc, era)
            except CallCancelled:  # a sync handler's thread: the call was cancelled (the transport answers it) or ended
                return error_reply(request_id, RequestCancelledError(), era)
            except Exception:
                logger.exception("internal error in %s (request id %r)", operation, request_id)
                return error_reply(request_id, InternalError(), era)
            finally:
                if state.created is not None:  # the handler failed: the server log still names what it never awaited
                    _report_unawaited(state, None, tool)
                state.outbound = None
                call_signal.release()  # work a thread of the handler's still runs on the loop ends with the call
                if shutdown is not None:
                    shutdown.call_ended(call_signal)
                if live is not None and session is not None:
                    self.live.call_ended(live, session.id, request_id, state.signal)

        def cancelled() -> Reply | None:
            if state.signal.reason == SHUTDOWN_REASON:
                return error_reply(request_id, ServerShuttingDownError(), era)
            if era == "modern":
                return None
            return Reply(error_message(request_id, RequestCancelledError()))

        return PreparedCall(runner, signal, background, cancelled, state)

    def _stateless_session_id(self, envelope: RequestEnvelope) -> str | None:
        """``ctx.session_id`` of a 2025 request served without a session: a fresh token per
        request when ``expose_stateless_session_id`` is on, else None (2026: always None)."""
        if envelope.era == "legacy" and self.settings.expose_stateless_session_id:
            return new_session_id()
        return None
