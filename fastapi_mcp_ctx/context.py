"""The request ``Context``: a lazy view over one MCP call's state.

Handlers get it as ``ctx: Context = Depends(mcp_context)``; code without a ``ctx`` argument
calls :func:`get_request_context` (a ``contextvars`` lookup, correct under concurrency and in
worker threads of sync tools). ``mcp_context`` is a plain FastAPI dependency reading the
call state from the request scope, so ``app.dependency_overrides[mcp_context]`` works.

Like Starlette's ``HTTPConnection`` the view does no I/O in ``__init__``; everything is a
property over :class:`CallState`, built by the dispatcher for each call. This module never
imports the router or the dispatcher.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime, timezone
from types import GenericAlias, MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NoReturn

from starlette.requests import Request
from typing_extensions import TypeVar

from . import _asking, _call_outbound
from ._call_state import CallState, ChangeNotifications, ClientRequester, StreamControl
from ._call_state import Outbound as Outbound
from ._cancel_signal import CancelSignal
from ._client_view import ClientView
from ._content import ContentCollector
from ._envelope import Era, parse_traceparent
from ._logging import ContextLogger
from ._outputs import CallOutputs
from .consent import ConsentGate
from .contracts import undeclared_reason
from .enrichment import Enrich
from .errors import InternalError, NoBackChannelError
from .input_required import ElicitAnswer
from .inputs import Inputs
from .settings import McpSettings

if TYPE_CHECKING:
    import mcp_types as types
    from pydantic import BaseModel

    from .state import ContextState

    M = TypeVar("M", bound=BaseModel)

__all__ = [
    "CallState",
    "CancelSignal",
    "ChangeNotifications",
    "ClientRequester",
    "ClientView",
    "Context",
    "StreamControl",
    "get_request_context",
    "mcp_context",
]
# CallState and the Protocols (``_call_state``), CancelSignal (``_cancel_signal``) and ClientView
# (``_client_view``) are re-exported: this module is where the package and users import them from.

SCOPE_KEY: Final = "fastapi_mcp_ctx.call"
_current: ContextVar[Context | None] = ContextVar("fastapi_mcp_ctx_context", default=None)

ReasonT = TypeVar("ReasonT", bound=str, default=str)
"""The error reasons a handler's ``Context[Literal[...]]`` may ``fail`` with (``contracts.py``)."""

if TYPE_CHECKING:
    from typing import Generic as _Reasons
else:

    class _Reasons:
        """At run time ``Context`` is a plain class (``typing.Generic`` in its MRO costs ~2.7k
        instructions a call); ``Context[...]`` is a ``types.GenericAlias`` for ``get_type_hints``."""

        def __class_getitem__(cls, item: Any) -> type:
            return object


class Context(_Reasons[ReasonT]):
    """The handler-facing view of one MCP call (a lazy view over :class:`CallState`).

    ``Context[Literal["not_found", ...]]`` types :meth:`fail` / :meth:`recovery_for` with the
    reasons the tool declares (``errors=[ErrorContract(...)]``); a bare ``Context`` takes any.

    Identity: ``request_id``, ``timestamp`` (ISO 8601), ``tenant_id`` (``"default"`` without
    auth), ``session_id`` (2025 sessions; None in 2026), ``trace_id`` / ``span_id`` (W3C
    ``traceparent`` from the header or ``_meta``), ``auth``, ``operation``, ``extra``.
    Client: ``era``, ``protocol_version``, ``client_info``, ``client_capabilities``,
    ``client`` (``can``/``require``), ``progress_token``, ``signal``, ``uri``.
    Actions: ``report_progress``, ``log``, ``notify``, ``notify_*_list_changed``,
    ``notify_resource_updated``, ``close_sse_stream``, ``state``, ``with_extra``, ``send_request``.
    Results: ``enrich`` (declared notices, totals, echoes), ``content`` (image/audio blocks),
    ``fail`` / ``recovery_for`` (declared error contracts).
    """

    __slots__ = ("_call", "_log", "_state")
    if not TYPE_CHECKING:
        __class_getitem__ = classmethod(GenericAlias)

    def __init__(self, call: CallState) -> None:
        self._call = call
        self._log: ContextLogger | None = None
        self._state: ContextState | None = None

    # -- identity -------------------------------------------------------------------------
    @property
    def request_id(self) -> str | int:
        """The JSON-RPC id of this request, exactly as sent."""
        return self._call.request_id

    @property
    def timestamp(self) -> str:
        """Request start time, ISO 8601 UTC (``2026-11-29T20:34:11.123456+00:00``)."""
        return datetime.fromtimestamp(self._call.started_at, timezone.utc).isoformat()

    @property
    def tenant_id(self) -> str | None:
        """The caller's tenant: ``"default"`` without auth; None when auth has no tenant claim."""
        return self._call.tenant_id

    @property
    def session_id(self) -> str | None:
        """The 2025-era ``Mcp-Session-Id``; None in the 2026-07-28 era and in stateless mode."""
        return self._call.session_id

    @property
    def trace_id(self) -> str | None:
        """32-hex W3C trace id: the OpenTelemetry span's when telemetry is on, else from
        ``traceparent`` (header or ``_meta``), None when absent."""
        if self._call.trace_id is not None:
            return self._call.trace_id
        parsed = parse_traceparent(self._call.envelope.trace.get("traceparent"))
        return parsed[0] if parsed else None

    @property
    def span_id(self) -> str:
        """16-hex id of this handler's span (the OpenTelemetry span's when telemetry is on)."""
        if self._call.span_id is None:
            self._call.span_id = secrets.token_hex(8)
        return self._call.span_id

    @property
    def trace(self) -> Mapping[str, str]:
        """``traceparent`` / ``tracestate`` / ``baggage`` as received."""
        return MappingProxyType(self._call.envelope.trace)

    @property
    def auth(self) -> Any:
        """Authenticated principal (claims), or None when authentication is off."""
        return self._call.auth

    @property
    def operation(self) -> str | None:
        """What this call does, e.g. ``"tools/call:add_note"``."""
        return self._call.operation

    @property
    def extra(self) -> Mapping[str, Any]:
        """Read-only correlation bag (see :meth:`with_extra`)."""
        return self._call.extra

    def with_extra(self, **values: Any) -> Context[ReasonT]:
        """A copy of this context whose ``extra`` is merged with ``values`` (this one unchanged)."""
        if self._call.outputs is None:  # the copy's ctx.enrich / ctx.content reach this call's result
            self._call.outputs = CallOutputs()
        clone: Context[ReasonT] = Context(replace(self._call, extra=MappingProxyType({**self._call.extra, **values})))
        clone._state = self._state
        return clone

    # -- client ---------------------------------------------------------------------------
    @property
    def era(self) -> Era:
        """``"legacy"`` (2025 handshake era) or ``"modern"`` (2026-07-28)."""
        return self._call.envelope.era

    @property
    def protocol_version(self) -> str:
        """The protocol revision of this request (``"2025-11-25"``, ``"2026-07-28"``…)."""
        return self._call.envelope.protocol_version

    @property
    def method(self) -> str:
        """The JSON-RPC method being served (``"tools/call"``…)."""
        return self._call.method

    @property
    def client_info(self) -> Mapping[str, Any] | None:
        """The client's ``Implementation`` (2025: from ``initialize``; 2026: from ``_meta``)."""
        return self._call.envelope.client_info

    @property
    def client_capabilities(self) -> Mapping[str, Any] | None:
        """The client's declared ``ClientCapabilities`` for this request, or None."""
        return self._call.envelope.client_capabilities

    @property
    def client(self) -> ClientView:
        """Capability checks: ``ctx.client.can("elicitation.form")``, ``ctx.client.require(...)``."""
        return ClientView(self._call.envelope.client_capabilities, self._call.envelope.client_info, self._call.envelope.meta)

    @property
    def progress_token(self) -> str | int | None:
        """``params._meta.progressToken`` (any JSON string or integer, ``0`` included), or None."""
        return self._call.envelope.progress_token

    @property
    def signal(self) -> CancelSignal:
        """Cancellation: ``ctx.signal.cancelled``, ``await ctx.signal.wait()``."""
        return self._call.signal

    @property
    def uri(self) -> str | None:
        """The resource URI, for resource handlers; None for tools."""
        return self._call.uri

    @property
    def request(self) -> Request:
        """The HTTP request that carried this call."""
        return self._call.request

    @property
    def settings(self) -> McpSettings:
        """The server settings."""
        return self._call.settings

    # -- actions --------------------------------------------------------------------------
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

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send any notification on this call's stream (dropped when there is none)."""
        await _call_outbound.notify(self._call, method, params)

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

    async def notify_prompts_list_changed(self) -> None:
        """Like :meth:`notify_tools_list_changed`, for prompts (needs ``list_changed={"prompts"}``)."""
        if self._call.notifications is not None:
            await _call_outbound.publish_change(self._call.notifications.list_changed("prompts"), "notifications/prompts/list_changed")

    async def notify_resources_list_changed(self) -> None:
        """Like :meth:`notify_tools_list_changed`, for resources (needs ``list_changed={"resources"}``)."""
        if self._call.notifications is not None:
            await _call_outbound.publish_change(
                self._call.notifications.list_changed("resources"), "notifications/resources/list_changed"
            )

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

    async def close_standalone_sse_stream(self) -> bool:
        """End the connection of this session's GET stream (after a ``retry`` hint); the client
        resumes it with ``Last-Event-ID`` and gets what was sent meanwhile.

        Returns:
            True when a connection was closed (same conditions as :meth:`close_sse_stream`,
            and the session's GET stream must be open).
        """
        control = self._call.stream_control
        return control is not None and await control.close_standalone()

    @property
    def log(self) -> ContextLogger:
        """Dual-sink logger: ``await ctx.log.info("message", key=value)``.

        Server log: logger ``fastapi_mcp_ctx`` with ``request_id``, ``tenant_id``,
        ``session_id``, ``trace_id``; ``notifications/message``: ``logger`` is the tool's name
        (the server name outside a tool).
        """
        if self._log is None:
            self._log = _call_outbound.call_logger(self._call, self.trace_id)
        return self._log

    @property
    def state(self) -> ContextState:
        """Tenant-scoped key-value storage (see ``fastapi_mcp_ctx.state.ContextState``).

        Raises:
            InternalError: no state backend is configured on the router.
        """
        if self._state is None:
            factory = self._call.state_factory
            if factory is None:
                raise InternalError("No state backend is configured")
            self._state = factory(self._call.tenant_id)
        return self._state

    def __repr__(self) -> str:
        return f"Context(request_id={self.request_id!r}, method={self.method!r}, era={self.era!r})"

    # -- multi-round-trip input (fastapi_mcp_ctx._asking, fastapi_mcp_ctx.inputs) ----------
    def request_input(
        self,
        input_requests: Mapping[str, Mapping[str, Any]] | None = None,
        request_state: str | None = None,
        fallback_hint: str | None = None,
    ) -> NoReturn:
        """Ask the client for input and end this attempt of the handler; never returns.

        2026-07-28: the call's result is ``input_required`` (``inputRequests``, the sealed
        ``requestState``); the client's retry runs the handler again with the answers on
        :attr:`inputs`. 2025 era: the server sends the requests on this call's stream and
        runs the handler again with the answers (at most ``MCP_INPUT_MAX_ROUNDS`` times).
        Served on ``tools/call``, ``resources/read`` and ``prompts/get`` (spec 2026-07-28
        ``basic/patterns/mrtr``). Build the entries with ``fastapi_mcp_ctx.input_required``.

        Args:
            input_requests: ``{key: entry}`` (``input_required.elicit(...)``...).
            request_state: a plain string the next round reads with ``ctx.inputs.state()``
                (sealed on the wire; keep it a handle, e.g. a ``ctx.state`` key).
            fallback_hint: a sentence appended to the refusal's hint when the client cannot
                answer (``"Or call again with format supplied."``).
        Raises:
            InputRequired: the signal (do not catch it).
            TypeError: neither ``input_requests`` nor ``request_state``; a malformed entry.
            MissingCapabilityError: 2026, a kind the request did not declare (-32021).
            ClientCapabilityMissingError: 2025, a kind the client did not declare, or a
                request without a session (-32600, ``client_capability_missing``).
            InternalError: called while serving another method.
        """
        _asking.request_input(self._call, self.client.can, input_requests, request_state, fallback_hint)

    @property
    def inputs(self) -> Inputs:
        """The answers of this round: ``view(name)``, ``accepted(name, Model)``, ``state()``
        (see ``fastapi_mcp_ctx.inputs``); only kinds the client declared reach it."""
        return Inputs(self._call.input_round)

    async def elicit(self, message: str, schema: type[M], *, key: str | None = None, timeout: float | None = None) -> ElicitAnswer[M]:
        """Ask the user to fill a form (``schema``: a pydantic model); both eras.

        2025: a live ``elicitation/create`` on this call's stream. 2026-07-28: the first call
        ends the handler with ``input_required``; the retry runs the handler again and this
        call returns the answer (earlier answers travel in the sealed request state). Code
        before an awaited question runs again on each 2026 round.

        Args:
            key: the ``inputRequests`` key (default ``elicit-1``, ``elicit-2``… in call order).
            timeout: seconds to wait for the answer (2025; default ``MCP_SERVER_REQUEST_TIMEOUT_SECONDS``).
        Returns:
            ``ElicitAnswer(action, data, content)``: ``data`` is the validated model when accepted.
        Raises:
            MissingCapabilityError / ClientCapabilityMissingError: not declared (see request_input).
            ServerRequestError: 2025, the request failed (timeout, client error, no stream).
        """
        return await _asking.ask_elicit(self, self._call, self.client.can, message, schema, key, timeout)

    async def sample(
        self,
        prompt_or_params: str | Mapping[str, Any],
        *,
        key: str | None = None,
        timeout: float | None = None,
        progress_interval: float | None = 5.0,
        **options: Any,
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
        """Ask the client's model (``sampling/createMessage``); both eras, like :meth:`elicit`.

        ``prompt_or_params``: a prompt (one user message; ``options`` are the keywords of
        ``input_required.sample``: ``max_tokens`` (default 1000), ``system_prompt``...) or the
        full request params. While a 2025 request waits, ``notifications/progress`` is sent
        every ``progress_interval`` seconds when the call has a progress token (None: never).
        """
        return await _asking.ask_sample(self, self._call, self.client.can, prompt_or_params, key, timeout, progress_interval, options)

    async def list_roots(self, *, key: str | None = None, timeout: float | None = None) -> list[types.Root]:
        """The client's roots (``roots/list``); both eras, like :meth:`elicit`."""
        return await _asking.ask_list_roots(self, self._call, self.client.can, key, timeout)

    # -- consent (fastapi_mcp_ctx.consent) ------------------------------------------------
    @property
    def consent(self) -> ConsentGate:
        """Single-use consent records: ``await ctx.consent.require(operation=..., target=...,
        content_hash=..., message=...)`` returns only once the user confirmed this operation
        (see ``fastapi_mcp_ctx.consent``)."""
        return ConsentGate(self)

    # -- result enrichment, content blocks, error contracts (enrichment.py, _content.py, contracts.py)
    @property
    def enrich(self) -> Enrich:
        """The tool's declared enrichment: ``ctx.enrich(totalCount=3)``, ``.notice(text)``,
        ``.total(n)``, ``.echo(query)``; a no-op when it declares none (``fastapi_mcp_ctx.enrichment``)."""
        return Enrich(self._call)

    @property
    def content(self) -> ContentCollector:
        """Blocks prepended to the tool result's ``content``: ``ctx.content.image(data, "image/png")``,
        ``.audio(data, "audio/wav")``, ``ctx.content(block)`` (``fastapi_mcp_ctx._content``)."""
        return ContentCollector(self._call)

    def fail(self, reason: ReasonT, message: str | None = None, /, **data: Any) -> NoReturn:
        """Raise the declared failure ``reason``: a :class:`~fastapi_mcp_ctx.errors.ToolError`
        with the contract's code and ``data.recovery.hint``, ``message`` (default: the
        contract's) and ``data`` as the envelope's extra fields.

        Raises:
            ToolError: always, for a declared reason.
            DeclarationError: ``reason`` is not declared by this handler's ``errors=``.
            ValueError / TypeError: ``data`` sets a reserved key or has non-string keys.
        """
        contracts = self._call.contracts
        if contracts is None:
            raise undeclared_reason(reason, self._call.operation or self._call.method, ())
        raise contracts.failure(reason, message, data)

    def recovery_for(self, reason: ReasonT) -> str | None:
        """The declared ``hint`` of ``reason``, None when this handler declares no such reason."""
        contracts = self._call.contracts
        contract = contracts.get(reason) if contracts is not None else None
        return contract.hint if contract is not None else None


async def mcp_context(request: Request) -> Context:
    """FastAPI dependency: the :class:`Context` of the MCP call being served.

    ``async def`` although it never awaits: FastAPI runs a plain ``def`` dependency in its
    thread pool, a thread hop per call for a dictionary lookup.

    Raises:
        RuntimeError: used outside an MCP call (e.g. on a plain path operation).
    """
    context: Context | None = request.scope.get(SCOPE_KEY)
    if context is None:
        raise RuntimeError("mcp_context is only available inside an MCP handler")
    return context


def get_request_context() -> Context | None:
    """The :class:`Context` of the MCP call running in this task or thread, or None."""
    return _current.get()


def bind_context(context: Context) -> Any:
    """Make ``context`` current for this task; returns the token for :func:`unbind_context`."""
    return _current.set(context)


def unbind_context(token: Any) -> None:
    """Restore the previous current context."""
    _current.reset(token)
