"""What a client is told about this server: its ``Implementation`` (``serverInfo``), the
``ServerCapabilities`` of each era and transport (declared from the era's method table), and
the two results that carry them: 2025's ``InitializeResult`` (the handshake) and
2026-07-28's ``server/discover`` result.

Spec 2025-11-25 ``basic/lifecycle`` §Initialization, §Version Negotiation; 2026-07-28
``server/discover``.
"""

from __future__ import annotations

from typing import Any

from .._transport.notifications import Notifier
from .._transport.sessions import check_initialize_params
from .._wire.versions import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS
from ..settings import McpSettings
from .task_calls import task_capabilities

__all__ = ["Handshake"]


class Handshake:
    """The declaring half of the ``Dispatcher`` (a base class like ``CallPreparation``: the
    dispatcher's fields below are read, never set here)."""

    __slots__ = ()
    settings: McpSettings
    notifier: Notifier | None

    def _table(self, era: str) -> frozenset[str]:
        raise NotImplementedError  # the Dispatcher's: the methods served in era

    @property
    def server_info(self) -> dict[str, Any]:
        """``Implementation`` of this server (``name``, ``version``)."""
        return {"name": self.settings.server_name, "version": self.settings.server_version}

    def capabilities(self, era: str = "legacy", *, transport: str = "http") -> dict[str, Any]:
        """``ServerCapabilities``: tools, logging, and the declared ``listChanged`` / ``subscribe``
        only where the transport and mode deliver them (B52): 2026 (listen), HTTP 2025 stateful
        (the GET stream) and stdio (the connection's output); never HTTP 2025 stateless."""
        if self.notifier is None:
            return {"tools": {"listChanged": False}, "logging": {}}
        modern = era == "modern"
        deliverable = transport == "stdio" or modern or self.settings.session_mode == "stateful"
        table = self._table(era)
        caps = self.notifier.capabilities(
            methods=table,
            deliverable=deliverable,
            subscribe_method="subscriptions/listen" if modern else "resources/subscribe",
        )
        if "completion/complete" in table:
            caps["completions"] = {}
        return {**caps, **task_capabilities(table, era), "logging": {}}

    def initialize_result(self, params: dict[str, Any], *, transport: str = "http") -> tuple[dict[str, Any], str]:
        """``InitializeResult`` for ``params`` and the negotiated version (``transport``: ``"http"``
        or ``"stdio"``, see :meth:`capabilities`).

        A requested version this server speaks is echoed; anything else gets the latest
        handshake version (spec 2025-11-25 ``basic/lifecycle`` §Version Negotiation).

        Raises:
            InvalidParamsError: ``protocolVersion`` not a string, ``capabilities`` not an object,
                ``clientInfo`` not an object with a string ``name`` (-32602; schema
                ``InitializeRequestParams``).
        """
        check_initialize_params(params)
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.capabilities(transport=transport),
            "serverInfo": self.server_info,
        }
        if self.settings.instructions:
            result["instructions"] = self.settings.instructions
        return result, str(version)

    def discover_result(self, transport: str = "http") -> dict[str, Any]:
        """The 2026-07-28 ``server/discover`` result: the versions served, the capabilities and
        the instructions (the dispatcher's ``_finish`` adds ``resultType``, cache hints and
        ``serverInfo``)."""
        result: dict[str, Any] = {"supportedVersions": list(MODERN_PROTOCOL_VERSIONS), "capabilities": self.capabilities("modern", transport=transport)}
        if self.settings.instructions:
            result["instructions"] = self.settings.instructions
        return result
