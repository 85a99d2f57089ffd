"""The read-only members of :class:`~fastapi_mcp_ctx.context.Context`: who and what the call is.

:class:`CallView` is the first base of ``Context``: identity (``request_id``, ``timestamp``,
``tenant_id``, ``session_id``), trace (``trace_id``, ``span_id``, ``trace``), the principal and
operation, the correlation ``extra``, and the client's side (``era``, ``protocol_version``,
``method``, ``client_info``, ``client_capabilities``, ``client``, ``progress_token``), plus
``signal``, ``uri``, ``request`` and ``settings``. Each is a property over the call's
:class:`~fastapi_mcp_ctx._context.call_state.CallState` (``Context`` holds it in its ``_call`` slot);
nothing here does I/O or sends anything.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from starlette.requests import Request

from .._wire.envelope import Era
from .._wire.trace_context import parse_traceparent
from ..settings import McpSettings
from .call_state import CallState
from .cancel_signal import CancelSignal
from .client_view import ClientView

__all__ = ["CallView"]


class CallView:
    """Identity, trace and client members of ``Context``, read from its ``_call`` (a mixin: no slots of its own)."""

    __slots__ = ()
    _call: CallState

    # -- identity -------------------------------------------------------------------------
    @property
    def request_id(self) -> str | int:
        """The JSON-RPC id of this request, exactly as sent."""
        return self._call.request_id

    @property
    def timestamp(self) -> str:
        """Request start time, ISO 8601 UTC (``2026-11-29T20:34:11.123456+00:00``)."""
        return datetime.fromtimestamp(self._call.started_at, UTC).isoformat()

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
