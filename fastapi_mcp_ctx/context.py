"""The request ``Context``: a lazy view over one MCP call's state.

Handlers get it as ``ctx: Context = Depends(mcp_context)``; code without a ``ctx`` argument
calls :func:`get_request_context` (a ``contextvars`` lookup, correct under concurrency and in
worker threads of sync tools). ``mcp_context`` is a plain FastAPI dependency reading the
call state from the request scope, so ``app.dependency_overrides[mcp_context]`` works.

Like Starlette's ``HTTPConnection`` the view does no I/O in ``__init__``; everything is a
property over :class:`CallState`, built by the dispatcher for each call. This module never
imports the router or the dispatcher. ``Context`` holds the call and its lazily made logger and
state; its members come in groups from its bases, each a module of its own, bottom to top:
``_context.call_view.CallView`` (identity, trace, the client's side), ``_context.call_messages.CallMessages``
(progress, notifications, server→client requests, SSE closes), ``_context.call_input.CallInput``
(multi-round-trip input). The logger, state, consent, results and error contracts are here.
"""

from __future__ import annotations

from contextvars import ContextVar
from types import GenericAlias, MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn

from fastapi import Depends
from starlette.requests import Request
from typing_extensions import TypeVar

from ._context import outbound as _call_outbound
from ._context.call_input import CallInput
from ._context.call_state import CallState, ChangeNotifications, ClientRequester, StreamControl
from ._context.call_state import Outbound as Outbound
from ._context.cancel_signal import CancelSignal
from ._context.client_view import ClientView
from ._context.content_blocks import ContentCollector
from ._context.logger import ContextLogger
from ._outputs import CallOutputs
from .consent import ConsentGate
from .contracts import undeclared_reason
from .enrichment import Enrich
from .errors import InternalError

if TYPE_CHECKING:
    from .state import ContextState

__all__ = [
    "CallState",
    "CancelSignal",
    "ChangeNotifications",
    "ClientRequester",
    "ClientView",
    "Context",
    "McpContext",
    "OptionalMcpContext",
    "StreamControl",
    "get_request_context",
    "mcp_context",
    "optional_mcp_context",
]
# CallState and the Protocols (``_context.call_state``), CancelSignal (``_context.cancel_signal``) and
# ClientView (``_context.client_view``) are re-exported: this module is where the package and users import them from.

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


class Context(CallInput, _Reasons[ReasonT]):
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

    def with_extra(self, **values: Any) -> Context[ReasonT]:
        """A copy of this context whose ``extra`` is merged with ``values`` (this one unchanged)."""
        if self._call.outputs is None:  # the copy's ctx.enrich / ctx.content reach this call's result
            self._call.outputs = CallOutputs()
        clone: Context[ReasonT] = Context(self._call.replaced(extra=MappingProxyType({**self._call.extra, **values})))
        clone._state = self._state
        return clone

    # -- logger and state (made at first use) ---------------------------------------------
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
            self._state._call = self._call  # pyright: ignore[reportPrivateUsage] - a sync tool's ctx.state.set runs on the call's loop
        return self._state

    def __repr__(self) -> str:
        return f"Context(request_id={self.request_id!r}, method={self.method!r}, era={self.era!r})"

    # -- consent (fastapi_mcp_ctx.consent) ------------------------------------------------
    @property
    def consent(self) -> ConsentGate:
        """Single-use consent records: ``await ctx.consent.require(operation=..., target=...,
        content_hash=..., message=...)`` returns only once the user confirmed this operation
        (see ``fastapi_mcp_ctx.consent``)."""
        return ConsentGate(self)

    # -- result enrichment, content blocks, error contracts (enrichment.py, _context/content_blocks.py, contracts.py)
    @property
    def enrich(self) -> Enrich:
        """The tool's declared enrichment: ``ctx.enrich(totalCount=3)``, ``.notice(text)``,
        ``.total(n)``, ``.echo(query)``; a no-op when it declares none (``fastapi_mcp_ctx.enrichment``)."""
        return Enrich(self._call)

    @property
    def content(self) -> ContentCollector:
        """Blocks prepended to the tool result's ``content``: ``ctx.content.image(data, "image/png")``,
        ``.audio(data, "audio/wav")``, ``ctx.content(block)`` (``fastapi_mcp_ctx._context.content_blocks``)."""
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
        RuntimeError: used outside an MCP call (e.g. on a plain path operation); a dependency
            shared by tools and path operations takes :func:`optional_mcp_context` instead.
    """
    context: Context | None = request.scope.get(SCOPE_KEY)
    if context is None:
        raise RuntimeError(
            "mcp_context is only available inside an MCP handler: a dependency that a plain path operation "
            "uses too takes `ctx: OptionalMcpContext` (Annotated[Context | None, Depends(optional_mcp_context)]), "
            "None outside an MCP call"
        )
    return context


async def optional_mcp_context(request: Request) -> Context | None:
    """FastAPI dependency: the :class:`Context` of the MCP call being served, or None on a plain
    path operation. For a dependency shared by tools and path operations (``load_item`` serving
    ``GET /items/{item_id}`` and a tool alike)."""
    return request.scope.get(SCOPE_KEY)


def get_request_context() -> Context | None:
    """The :class:`Context` of the MCP call running in this task or thread, or None."""
    return _current.get()


bind_context: Final = _current.set
"""``bind_context(context)``: make ``context`` current for this task; returns the token for
:func:`unbind_context` (the context variable's own method: no Python frame a call)."""

unbind_context: Final = _current.reset
"""``unbind_context(token)``: restore the previous current context."""

McpContext = Annotated[Context, Depends(mcp_context)]
McpContext.__doc__ = """``Annotated[Context, Depends(mcp_context)]``: the call's :class:`Context`, FastAPI's convention
for a reusable dependency. ``ctx: McpContext`` works in a handler and in a dependency's own
signature alike (where a bare ``ctx: Context`` is refused at registration: FastAPI would read it
as a request field)."""

OptionalMcpContext = Annotated[Context | None, Depends(optional_mcp_context)]
OptionalMcpContext.__doc__ = """``Annotated[Context | None, Depends(optional_mcp_context)]``: the call's :class:`Context`
in an MCP call, None on a plain path operation; for a dependency both use."""
