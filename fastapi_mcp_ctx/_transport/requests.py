"""Server→client requests of one call (``ctx.send_request``): the rules, the send, the wait.

A 2025-era call may ask the client something (``ping``, ``roots/list``,
``sampling/createMessage``, ``elicitation/create``) before it returns; the request goes on the
call's own stream (HTTP: the POST response, which becomes SSE; stdio: the connection) and the
client's answer comes back as a JSON-RPC response (HTTP: a new POST in the same session),
matched in a :class:`~fastapi_mcp_ctx._transport.pending.PendingRequests` table by scope and
typed id (spec 2025-11-25 ``basic/transports`` §Sending Messages items 4 and 6).

Everything that no wait could cure fails at once, before anything is sent (known faults
B06, B45):

- no back channel (:class:`~fastapi_mcp_ctx.errors.NoBackChannelError`): the 2026-07-28 era
  (it has no server→client requests: a call asks with an ``input_required`` result), a 2025
  request without a session (stateless mode, or ``auto`` without ``Mcp-Session-Id``: the
  answer, a separate POST, could not be routed back to the waiter), a client accepting
  ``application/json`` only (nothing can precede the result), a call already ended;
- an undeclared capability (:class:`~fastapi_mcp_ctx.errors.MissingCapabilityError`; spec
  2025-11-25 ``basic/lifecycle`` §Capability Negotiation, ``client/*`` §Capabilities), see
  :func:`required_capabilities`;
- a method that is no server→client request, params that do not fit the negotiated version's
  schema, a timeout that is not a positive number (``ValueError``: the handler's bug).

A request that is sent waits at most ``timeout`` seconds; then the client is told
(``notifications/cancelled`` for that id, on the same stream) and the handler gets
:class:`~fastapi_mcp_ctx.errors.ServerRequestTimeoutError` (spec 2025-11-25
``basic/lifecycle`` §Timeouts). An error answer is a
:class:`~fastapi_mcp_ctx.errors.ClientResponseError`. The pending entry goes on answer,
timeout, cancellation of the call and end of the session.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import anyio
from pydantic import ValidationError as PydanticValidationError

from .._context.call_state import CallState
from .._context.client_view import ClientView
from .._wire.envelope import Era
from .._wire.jsonrpc import notification_message
from ..errors import (
    ClientResponseError,
    MissingCapabilityError,
    NoBackChannelError,
    ServerRequestError,
    ServerRequestTimeoutError,
)
from ..input_required import required_capabilities
from .pending import PendingRequests

__all__ = ["BackChannel", "methods", "required_capabilities", "server_request_methods"]


@functools.cache
def methods() -> ModuleType:
    """``mcp_types.methods``, imported at the first server→client request: its per-version
    schemas hold about 6.6 MB that a server which never sends one does not need (idle RSS,
    issue 12)."""
    return importlib.import_module("mcp_types.methods")


@functools.cache
def server_request_methods() -> frozenset[str]:
    """Every method a server may send a client, at some protocol version."""
    return frozenset(method for method, _ in methods().SERVER_REQUESTS)

MODERN_ERA: Final = "the 2026-07-28 era has no server→client requests (a call asks the client with an input_required result)"
NO_SESSION: Final = (
    "this 2025 request has no session (MCP_SESSION_MODE=stateless, or auto without Mcp-Session-Id), so the "
    "client's answer could not be routed back; initialize a session (MCP_SESSION_MODE=stateful or auto) and send its id"
)
JSON_ONLY: Final = (
    "the client accepts only application/json on this request, so nothing can be sent before the result; "
    "send Accept: application/json, text/event-stream"
)
CALL_ENDED: Final = "the call has ended"
SCOPE_ENDED: Final = "the session or connection ended before the client answered"


def _check_request(method: Any, params: dict[str, Any] | None, timeout: Any, state: CallState) -> str:
    """Everything decidable before sending; returns the negotiated protocol version."""
    if not isinstance(method, str) or method not in server_request_methods():
        raise ValueError(f"{method!r} is not a server→client request; one of {', '.join(sorted(server_request_methods()))}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    needed = required_capabilities(method, params)
    try:
        ClientView(state.envelope.client_capabilities, None).require(*needed)
    except MissingCapabilityError as exc:
        raise MissingCapabilityError(
            exc.required, f"{method} needs the client capability {', '.join(needed)}, which this client did not declare"
        ) from None
    version = state.envelope.protocol_version
    surface = methods().SERVER_REQUESTS.get((method, version))
    if surface is None:
        raise ServerRequestError(method, f"{method} is not defined at protocol version {version} (this session's)")
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": method}
    if params is not None:
        body["params"] = params
    try:
        surface.model_validate(body, by_name=False)
    except PydanticValidationError as exc:
        raise ValueError(f"params of {method} do not fit the {version} schema: {exc}") from exc
    return version


def _answer(method: str, version: str, error: Mapping[str, Any] | None, result: Any) -> dict[str, Any]:
    """The result of a client's response, or the typed error it stands for."""
    if error is not None:
        code, message = error.get("code"), error.get("message")
        if isinstance(code, bool) or not isinstance(code, int) or not isinstance(message, str):
            raise ServerRequestError(method, f"The client answered {method} with a malformed error object")
        raise ClientResponseError(method, code, message, error.get("data"))
    if not isinstance(result, dict):
        raise ServerRequestError(method, f"The client's result for {method} is not an object")
    answer: dict[str, Any] = result  # pyright: ignore[reportUnknownVariableType]
    try:
        methods().validate_client_result(method, version, answer)
    except PydanticValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}" for e in exc.errors(include_url=False))
        raise ServerRequestError(method, f"The client's result for {method} does not fit the {version} schema: {problems}") from exc
    return answer


_REFUSED: dict[str, BackChannel] = {}


@dataclass(slots=True)  # not frozen: a frozen __init__ costs each call ~2k instructions; never mutated
class BackChannel:
    """Where one call's server→client requests go and where their answers come from (a
    :class:`~fastapi_mcp_ctx.context.ClientRequester`; it holds no call, so no cycle).

    Attributes:
        pending: the table the answers are matched in (None when refused).
        scope: the scope answers must arrive in (the 2025 session id; None on stdio).
        refusal: why no request can be sent on this call (then every request fails at once).
    """

    pending: PendingRequests | None
    scope: str | None = None
    refusal: str | None = None

    @classmethod
    def refused(cls, detail: str) -> BackChannel:
        """A channel on which every request fails at once with ``NoBackChannelError(detail)``
        (one shared object per ``detail``, never mutated: a sessionless call builds none)."""
        channel = _REFUSED.get(detail)
        if channel is None:
            channel = _REFUSED[detail] = cls(None, None, detail)
        return channel

    @classmethod
    def http(cls, pending: PendingRequests | None, *, era: Era, session_id: str | None, sse_allowed: bool) -> BackChannel:
        """The channel of an HTTP call: the POST response stream, answers matched in ``session_id``."""
        if era == "modern":
            return cls.refused(MODERN_ERA)
        if session_id is None or pending is None:
            return cls.refused(NO_SESSION)
        if not sse_allowed:
            return cls.refused(JSON_ONLY)
        return cls(pending, session_id)

    @classmethod
    def connection(cls, pending: PendingRequests, *, era: Era) -> BackChannel:
        """The channel of a call on a connection that is its own session (stdio)."""
        return cls.refused(MODERN_ERA) if era == "modern" else cls(pending, None)

    async def send_request(self, call: CallState, method: str, params: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        """Send ``method`` for ``call`` and return the client's result (``Context.send_request``)."""
        if self.refusal is not None or self.pending is None:
            raise NoBackChannelError(method, self.refusal or NO_SESSION)
        version = _check_request(method, params, timeout, call)
        outbound = call.outbound
        if outbound is None or call.signal.cancelled:
            raise NoBackChannelError(method, CALL_ENDED)
        pending = self.pending
        try:
            request_id = pending.open(self.scope)
        except anyio.ClosedResourceError:
            raise NoBackChannelError(method, SCOPE_ENDED) from None
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await outbound(message)
        except BaseException:
            pending.discard(request_id)
            raise
        try:
            response = await pending.wait(request_id, timeout)
        except TimeoutError:
            reason = f"no answer within {timeout:g} s"
            await outbound(notification_message("notifications/cancelled", {"requestId": request_id, "reason": reason}))
            raise ServerRequestTimeoutError(method, timeout) from None
        except anyio.ClosedResourceError:
            raise NoBackChannelError(method, SCOPE_ENDED) from None
        return _answer(method, version, response.error, response.result)
