"""One call's state: :class:`CallState`, built by the dispatcher for each call and read by the
:class:`~fastapi_mcp_ctx.context.Context` view, and the Protocols of what a transport plugs into it
(change notifications, server→client requests, stream control).

Everything here is per call and never shared; the transports and the router provide the
implementations, so this module imports none of them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from starlette.requests import Request

from .._bridge import Created
from .._outputs import CallOutputs
from .._wire.envelope import RequestEnvelope
from ..contracts import ErrorContracts
from ..enrichment import EnrichmentSpec
from ..inputs import InputRound
from ..settings import McpSettings
from .cancel_signal import CancelSignal

if TYPE_CHECKING:
    from ..state import ContextState

__all__ = ["CallState", "ChangeNotifications", "ClientRequester", "Outbound", "StreamControl", "TaskView", "no_task_start"]

Outbound = Callable[[dict[str, Any]], Awaitable[None]]
"""Sends one JSON-RPC message on the call's own stream."""


_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})
"""``CallState.extra`` of a call with none: one read-only empty mapping shared by every call."""


class ChangeNotifications(Protocol):
    """Where ``ctx.notify_*_list_changed`` / ``ctx.notify_resource_updated`` publish (the router's notifier)."""

    async def list_changed(self, kind: Literal["tools", "prompts", "resources"]) -> None: ...

    async def resource_updated(self, uri: str) -> None: ...


class ClientRequester(Protocol):
    """Sends a call's server→client requests and returns the client's ``result``
    (``fastapi_mcp_ctx._transport.requests.BackChannel``; see ``Context.send_request``)."""

    async def send_request(self, call: CallState, method: str, params: dict[str, Any] | None, timeout: float) -> dict[str, Any]: ...


class StreamControl(Protocol):
    """What ``ctx.close_sse_stream()`` reaches: the transport of a resumable 2025 call."""

    async def close_connection(self) -> bool: ...

    async def close_standalone(self) -> bool: ...


class TaskView(Protocol):
    """``ctx.task``: the task a call runs as (``fastapi_mcp_ctx._tasks.engine.TaskHandle``)."""

    @property
    def task_id(self) -> str: ...

    async def status(self, message: str) -> None: ...


async def no_task_start() -> None:
    """``ctx.start_task()`` of a ``task="optional"`` tool whose client did not opt into tasks: no
    task starts, the handler goes on as the plain call it is."""


class CallState:
    """Everything the dispatcher knows about one call (built per request, never shared).

    A plain class, not slotted: the fields a call rarely sets (its stream control, input round, enrichment,
    task...) are read from the class until set, so building one sets only what the dispatcher
    knows (about half the fields: the per-call cost of a slotted dataclass's generated
    ``__init__``, which sets every field and calls three factories, is halved)."""

    request_id: str | int
    method: str
    envelope: RequestEnvelope
    settings: McpSettings
    request: Request
    session_id: str | None = None
    tenant_id: str | None = "default"
    auth: Any = None
    operation: str | None = None
    logger_name: str | None = None
    uri: str | None = None
    extra: Mapping[str, Any] = _NO_EXTRA
    outbound: Outbound | None = None
    signal: CancelSignal
    client_log_level: Callable[[], str | None]
    state_factory: Callable[[str | None], ContextState] | None = None
    started_at: float
    span_id: str | None = None
    last_progress: float | None = None
    notifications: ChangeNotifications | None = None
    back_channel: ClientRequester | None = None
    stream_control: StreamControl | None = None
    input_round: InputRound | None = None
    trace_id: str | None = None
    """The active OpenTelemetry span's trace id (32 hex), set by ``_server.telemetry`` when tracing."""
    enrichment: EnrichmentSpec | None = None
    contracts: ErrorContracts | None = None
    outputs: CallOutputs | None = None
    loop: asyncio.AbstractEventLoop | None = None
    """The event loop the call runs on (set when it starts): a sync tool's ``ctx.log.info(...)`` runs there (``_bridge``)."""
    created: list[Created] | None = None
    """The Context coroutines made on the loop during the call, for the never-awaited report (``_bridge``)."""
    task: TaskView | None = None
    """The task this call runs as (``_tasks``), None for a plain call (2026: questions are then ``input_required`` results)."""
    task_starter: Callable[[], Awaitable[TaskView | None]] | None = None
    """``ctx.start_task()`` of a tool declared ``task_start="handler"`` (``_tasks.engine``), until it ran;
    :func:`no_task_start` for a ``task="optional"`` tool the client did not opt into."""

    def __init__(
        self,
        request_id: str | int,
        method: str,
        envelope: RequestEnvelope,
        settings: McpSettings,
        request: Request,
        session_id: str | None = None,
        tenant_id: str | None = "default",
        auth: Any = None,
        operation: str | None = None,
        logger_name: str | None = None,
        uri: str | None = None,
        client_log_level: Callable[[], str | None] | None = None,
        state_factory: Callable[[str | None], ContextState] | None = None,
        notifications: ChangeNotifications | None = None,
        signal: CancelSignal | None = None,
        **others: Any,
    ) -> None:
        self.request_id = request_id
        self.method = method
        self.envelope = envelope
        self.settings = settings
        self.request = request
        self.session_id = session_id
        self.tenant_id = tenant_id
        self.auth = auth
        self.operation = operation
        self.logger_name = logger_name
        self.uri = uri
        self.client_log_level = client_log_level if client_log_level is not None else _no_level
        self.state_factory = state_factory
        self.notifications = notifications
        self.signal = signal if signal is not None else CancelSignal()
        self.started_at = time.time()
        for name, value in others.items():  # the rarely set fields (tests, the task engine)
            if name not in _OTHER_FIELDS:
                raise TypeError(f"CallState() got an unexpected keyword argument {name!r}")
            setattr(self, name, value)

    def replaced(self, **changes: Any) -> CallState:
        """A copy of this state with ``changes`` (field names) applied; the rest is shared
        (``ctx.with_extra``: the same signal, request, outbound)."""
        clone = object.__new__(CallState)
        clone.__dict__.update(self.__dict__)
        for name, value in changes.items():
            if name not in CallState.__annotations__:
                raise TypeError(f"CallState has no field {name!r}")
            setattr(clone, name, value)
        return clone


def _no_level() -> str | None:
    """``client_log_level`` of a call whose client set none."""
    return None


_init_code = CallState.__init__.__code__
_OTHER_FIELDS: Final = frozenset(CallState.__annotations__) - frozenset(_init_code.co_varnames[: _init_code.co_argcount])
"""The fields ``CallState(...)`` takes as keywords beyond its named parameters (the rarely set ones)."""
