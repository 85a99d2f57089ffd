"""The method table of both eras, and the one place exceptions become wire errors.

``Dispatcher.dispatch`` takes a validated JSON-RPC request plus its envelope and returns
the HTTP response: a JSON body for plain methods, a :class:`CallResponse` (JSON or SSE)
for ``tools/call``. ``Dispatcher.serve`` is the transport-neutral core (stdio uses it): a
:class:`Reply`, or a :class:`PreparedCall` the transport runs (``dispatch`` makes a ``tools/call``
ready itself, as ``serve`` would, without ``serve``'s coroutine). Methods outside an era's table
answer ``-32601`` (HTTP 404 in the 2026-07-28 era, where removed methods such as ``initialize``
and ``ping`` land too).

``tools/call`` is made ready by the dispatcher's base :class:`~._server.tool_calls.ToolCalls`, every
call by its base :class:`~._server.call_prep.CallPreparation`; the capabilities, ``initialize`` and
``server/discover`` results are its base :class:`~._server.handshake.Handshake`'s; ``tasks/*`` go
to ``_server.task_calls``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from .._auth.scopes import may_use
from .._auth.sealing import RequestStateSealer
from .._context.cancel_signal import CancelSignal
from .._context.event_loop import LOOP_SCOPE_KEY
from .._handlers.features import CALL_METHODS, Features, per_caller
from .._handlers.registry import ToolRegistry
from .._tasks.engine import TaskEngine
from .._tasks.wire import declares_extension, missing_extension
from .._transport.listen import ListenResponse
from .._transport.listen_filter import parse_filter
from .._transport.notifications import Notifier
from .._transport.pending import PendingRequests
from .._transport.requests import BackChannel
from .._transport.resumable import ResumableStreams
from .._transport.resumable_call import ResumableCallResponse, answered_stream
from .._transport.sessions import LiveSessions, SessionRecord, SessionStore
from .._transport.shutdown import ShutdownCoordinator
from .._transport.streams import CallResponse, Reply
from .._transport.subscriptions import SessionAddress
from .._wire.envelope import LOG_LEVELS, RequestEnvelope
from .._wire.jsonrpc import EncodedResult, JsonRpcRequest, dumps, result_message
from .._wire.pages import decode_cursor, paginate
from ..auth import Principal
from ..errors import (
    InternalError,
    InvalidParamsError,
    McpError,
    MethodNotFoundError,
)
from ..settings import McpSettings
from ..state import ContextState
from .call_prep import PRINCIPAL_SCOPE_KEY, echo
from .handshake import Handshake
from .outcomes import PreparedCall, error_reply, json_reply
from .task_calls import call_owner, legacy_result_run, serve_task_method, task_methods
from .telemetry import Telemetry
from .tool_calls import ToolCalls

__all__ = ["Dispatcher"]

logger = logging.getLogger("fastapi_mcp_ctx")


def _failed(exc: Exception, message: JsonRpcRequest, era: str) -> Reply:
    """The error reply of a request whose serving raised ``exc`` (called in its ``except``: a
    crash is logged with its traceback, answered -32603)."""
    if isinstance(exc, McpError):
        return error_reply(message.id, exc, era)
    logger.exception("internal error serving %s (request id %r)", message.method, message.id)
    return error_reply(message.id, InternalError(), era)


SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
JSON_OK_SCOPE_KEY: Final = "fastapi_mcp_ctx.json_ok"
LEGACY_METHODS: Final = frozenset({"ping", "tools/list", "tools/call", "logging/setLevel"})
MODERN_METHODS: Final = frozenset({"server/discover", "tools/list", "tools/call", "subscriptions/listen"})


@dataclass(slots=True)
class Dispatcher(ToolCalls, Handshake):
    """Serves JSON-RPC requests of both eras for one :class:`McpRouter`."""

    registry: ToolRegistry
    settings: McpSettings
    sessions: SessionStore
    live: LiveSessions
    state_factory: Callable[[str | None], ContextState] | None = None
    notifier: Notifier | None = None
    pending: PendingRequests | None = None
    streams: ResumableStreams | None = None
    shutdown: ShutdownCoordinator | None = None
    sealer: RequestStateSealer | None = None
    features: Features | None = None
    telemetry: Telemetry | None = None
    tasks: TaskEngine | None = None
    """The router's task engine (``_tasks``): its methods are served once a task tool is registered."""

    def __post_init__(self) -> None:
        if self.telemetry is None and self.settings.telemetry != "off":
            self.telemetry = Telemetry(self.settings)
    _pages: dict[tuple[Any, ...], EncodedResult] = field(default_factory=lambda: {})
    """Encoded ``tools/list`` pages (see :meth:`_tools_list`)."""

    # -- helpers -------------------------------------------------------------------------
    def _not_in_era(self, method: str, era: str) -> MethodNotFoundError:
        """``-32601``; for a method the other era serves (2026 ``ping``, 2025 ``server/discover``)
        the message and recovery hint say which era has it."""
        other = "legacy" if era == "modern" else "modern"
        if method not in self._table(other):
            return MethodNotFoundError(data={"method": echo(method)})
        where = "the 2025 handshake era (removed in 2026-07-28)" if other == "legacy" else "the 2026-07-28 era"
        return MethodNotFoundError(
            f"Method not found: {method} exists only in {where}",
            data={"method": method},
            recovery_hint="Send it at a protocol version of that era, or use this era's equivalent.",
        )

    def _table(self, era: str) -> frozenset[str]:
        """The methods served in ``era``: the core table plus the resources, prompts and
        completions the application registered (``_handlers.features``)."""
        table = MODERN_METHODS if era == "modern" else LEGACY_METHODS
        if self.tasks is not None and self.registry.any_task():
            table = table | task_methods(era)
        if self.features is None:
            return table
        subscribe = self.notifier is not None and self.notifier.served.resources_subscribe
        return self.features.methods(era, subscribe, table)

    def _finish(self, result: dict[str, Any], envelope: RequestEnvelope, *, cacheable: bool = False) -> dict[str, Any]:
        if envelope.era == "modern":
            result.setdefault("resultType", "complete")  # input_required results come set (_server.input_rounds)
            if cacheable and result["resultType"] != "input_required":  # an input_required result has no hints
                result.setdefault("ttlMs", self.settings.cache_ttl_ms)
                result.setdefault("cacheScope", self.settings.cache_scope)
            meta = result.setdefault("_meta", {})
            meta.setdefault(SERVER_INFO_KEY, self.server_info)
        return result

    # -- dispatch ------------------------------------------------------------------------
    async def dispatch(
        self,
        message: JsonRpcRequest,
        envelope: RequestEnvelope,
        request: Request,
        session: SessionRecord | None,
        headers: Mapping[str, str],
        sse_allowed: bool,
    ) -> Response:
        """Serve one request over HTTP: JSON, or a :class:`CallResponse` for ``tools/call``."""
        json_ok: bool = request.scope.get(JSON_OK_SCOPE_KEY, True)
        era = envelope.era
        method = message.method
        if method == "subscriptions/listen" and era == "modern":
            return await self._listen_response(message, envelope, request, headers, json_ok)
        channel = BackChannel.http(self.pending, era=era, session_id=session.id if session else None, sse_allowed=sse_allowed)
        telemetry = self.telemetry
        if telemetry is not None and monotonic() >= telemetry.next_check:  # (before: start() would answer None)
            span = telemetry.start(message, envelope, request.scope, session.id if session else None)
        else:
            span = None
        outcome: Reply | PreparedCall
        if method == "tools/call":  # serve's first branch, without its coroutine
            try:
                outcome = self._tools_call(message, envelope, request, session, True, CancelSignal(), channel)
            except Exception as exc:  # noqa: BLE001 - as serve: every exception is a JSON-RPC error
                outcome = _failed(exc, message, era)
        else:
            outcome = await self.serve(message, envelope, request, session, back_channel=channel)
        if span is not None:  # OpenTelemetry (_server.telemetry): the span ends with the reply, or with the tool's run
            outcome = span.bind(outcome, None if isinstance(outcome, Reply) else outcome.state)
        streams = self.streams
        if streams is not None and session is not None and streams.serves(era, session, request.scope.get(LOOP_SCOPE_KEY)):
            if isinstance(outcome, Reply):
                return json_reply(outcome, headers) if json_ok else answered_stream(streams, outcome, session, headers)
            return ResumableCallResponse(streams, outcome, session, headers, sse_allowed=sse_allowed, json_allowed=json_ok)
        if isinstance(outcome, Reply):
            return json_reply(outcome, headers, json_ok=json_ok)
        return CallResponse(
            outcome.runner,
            outcome.signal,
            headers=headers,
            sse_allowed=sse_allowed,
            json_allowed=json_ok,
            background=outcome.background,
            cancelled_message=outcome.cancelled_message,
        )

    async def _listen_response(
        self, message: JsonRpcRequest, envelope: RequestEnvelope, request: Request, headers: Mapping[str, str], json_ok: bool
    ) -> Response:
        try:
            return await self._listen(message, headers, request.scope.get(PRINCIPAL_SCOPE_KEY), envelope)
        except McpError as exc:
            return json_reply(error_reply(message.id, exc, envelope.era), headers, json_ok=json_ok)

    async def serve(
        self,
        message: JsonRpcRequest,
        envelope: RequestEnvelope,
        request: Request,
        session: SessionRecord | None,
        *,
        http_headers: bool = True,
        signal: CancelSignal | None = None,
        back_channel: BackChannel | None = None,
    ) -> Reply | PreparedCall:
        """Serve one request on any transport; every exception becomes a JSON-RPC error here.

        Args:
            http_headers: False on a transport without headers (stdio): the 2026-07-28
                ``Mcp-Param-*`` checks do not apply.
            signal: the call's cancellation signal, when the transport makes it (default: a new one).
            back_channel: where the call's ``ctx.send_request`` goes (None: it fails at once).
        Returns:
            The final :class:`Reply`, or a :class:`PreparedCall` for ``tools/call``.
        """
        try:
            if message.method == "tools/call":  # in both eras' core tables, so in every _table
                return self._tools_call(
                    message, envelope, request, session, http_headers, signal if signal is not None else CancelSignal(), back_channel
                )
            return await self._serve_method(message, envelope, request, session, http_headers, signal, back_channel)
        except Exception as exc:  # noqa: BLE001 - every exception is a JSON-RPC error
            return _failed(exc, message, envelope.era)

    async def _serve_method(
        self,
        message: JsonRpcRequest,
        envelope: RequestEnvelope,
        request: Request,
        session: SessionRecord | None,
        http_headers: bool,
        signal: CancelSignal | None,
        back_channel: BackChannel | None,
    ) -> Reply | PreparedCall:
        """:meth:`serve` of a method other than ``tools/call`` (its exceptions: raised)."""
        if message.method not in self._table(envelope.era):
            raise self._not_in_era(message.method, envelope.era)
        if message.method.startswith("tasks/") and self.tasks is not None:
            owner = call_owner(request.scope.get(PRINCIPAL_SCOPE_KEY), session, envelope)
            if message.method == "tasks/result":  # 2025: blocks, asking the task's questions on its stream
                run = legacy_result_run(self.tasks, owner, message.params.get("taskId"), self.settings.task_poll_interval_ms / 1000)
                return self._prepare(
                    message, envelope, request, session, signal if signal is not None else CancelSignal(), back_channel,
                    run=run, operation="tasks/result", logger_name="tasks", private_scope=False,
                )  # fmt: skip
            result = await serve_task_method(self.tasks, message.method, message.params, envelope, owner, self.settings)
            return Reply(result_message(message.id, self._finish(result, envelope)))
        if message.method in CALL_METHODS and self.features is not None:
            invocation = self.features.prepare(
                message.method, message.params, envelope.era, principal=request.scope.get(PRINCIPAL_SCOPE_KEY), settings=self.settings
            )
            return self._prepare(
                message, envelope, request, session, signal if signal is not None else CancelSignal(), back_channel,
                run=invocation.run, operation=invocation.operation, logger_name=invocation.logger_name,
                private_scope=invocation.private_scope, uri=invocation.uri, cacheable=invocation.cacheable,
                contracts=invocation.contracts,
            )  # fmt: skip
        transport = "http" if http_headers else "stdio"
        principal: Principal | None = request.scope.get(PRINCIPAL_SCOPE_KEY)
        return Reply(result_message(message.id, await self._simple(message, envelope, session, transport, principal)))

    async def _simple(
        self,
        message: JsonRpcRequest,
        envelope: RequestEnvelope,
        session: SessionRecord | None,
        transport: str = "http",
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        method, params = message.method, message.params
        if method == "ping":
            return {}
        features = self.features
        if method == "tools/list":
            if self.settings.hide_unauthorized_tools and self.registry.any_scoped():  # per caller: never cached
                return self._tools_result(params.get("cursor"), envelope, principal)
            return self._tools_list(params.get("cursor"), envelope)
        if features is not None and (method.startswith("resources/") or method == "prompts/list"):
            tenant = principal.tenant_id if principal is not None else "default"
            subscriber = SessionAddress(tenant, session.id) if session is not None else None
            result = await features.simple(method, params, envelope.era, subscriber, principal=principal, settings=self.settings)
            return self._finish(result, envelope, cacheable=method.endswith("/list"))
        if method == "server/discover":
            return self._finish(self.discover_result(transport), envelope, cacheable=True)
        if method == "logging/setLevel":
            level = params.get("level")
            if level not in LOG_LEVELS:
                raise InvalidParamsError(f"Invalid log level: expected one of {', '.join(LOG_LEVELS)}")
            if session is not None:
                session.log_level = level
                await self.sessions.update(session)
            return {}
        raise MethodNotFoundError(data={"method": echo(method)})

    async def _listen(
        self, message: JsonRpcRequest, headers: Mapping[str, str], principal: Principal | None, envelope: RequestEnvelope
    ) -> Response:
        """2026 ``subscriptions/listen``: ``-32601`` when the application declared nothing to
        listen for (B52), else the stream of the caller's tenant (see ``_transport.listen``);
        ``notifications.taskIds`` (tasks extension) needs the extension declared (-32021)."""
        notifier = self.notifier
        tasks = self.tasks is not None and self.registry.any_task()
        if notifier is None or not (notifier.served.any or tasks):
            raise MethodNotFoundError(data={"method": message.method})
        tenant, owner = (principal.tenant_id, principal.owner_key) if principal is not None else ("default", None)
        listen_filter = parse_filter(message.params, notifier.served, tasks=tasks)
        if listen_filter.task_ids and not declares_extension(envelope.client_capabilities):
            raise missing_extension("notifications.taskIds")
        if self.features is not None:  # each URI needs its resource's scopes, as 2025 resources/subscribe (403)
            for uri in listen_filter.resource_uris:
                self.features.authorize_watch(uri, "modern", principal, self.settings, unknown_ok=True)
        task_owner = call_owner(principal, None, envelope) if listen_filter.task_ids else None
        stream = await notifier.open_listen(message.id, listen_filter, tenant_id=tenant, owner=owner, task_owner=task_owner)
        return ListenResponse(stream, notifier.hub, keepalive_seconds=self.settings.keepalive_seconds, headers=headers)

    def _tools_list(self, cursor: Any, envelope: RequestEnvelope) -> dict[str, Any]:
        """The ``tools/list`` result for ``cursor`` when every caller sees the same list, built and
        encoded once per registry version, era, page and list hints (an :class:`EncodedResult`; at
        most 64 pages kept)."""
        registry, settings, features = self.registry, self.settings, self.features
        start = decode_cursor("tools", cursor, len(registry))
        key = (
            registry.version, envelope.era, start, settings.page_size, settings.cache_ttl_ms,
            settings.cache_scope, settings.server_name, settings.server_version,
            features.list_cache.get("tools/list") if features is not None else None,
        )  # fmt: skip
        cached = self._pages.get(key)
        if cached is None:
            if len(self._pages) >= 64:
                self._pages.clear()
            result = self._tools_result(cursor, envelope, None)
            cached = self._pages[key] = EncodedResult(result, dumps(result))
        return EncodedResult(cached, cached.encoded)

    def _tools_result(self, cursor: Any, envelope: RequestEnvelope, principal: Principal | None) -> dict[str, Any]:
        filtered = self.settings.hide_unauthorized_tools and self.registry.any_scoped()
        if filtered:  # only what the caller may call
            listings = [t.listing for t in self.registry.tools() if may_use(t.scopes, principal)]
        else:
            listings = self.registry.listings()
        if envelope.era == "modern" and self.registry.any_task():  # execution.taskSupport is 2025-11-25's
            listings = [{k: v for k, v in listing.items() if k != "execution"} for listing in listings]
        page = paginate("tools", "tools", listings, cursor, self.settings.page_size)
        features = self.features
        page = features.list_hints("tools/list", page, envelope.era) if features is not None else page
        return self._finish(per_caller(page, envelope.era, filtered), envelope, cacheable=True)
