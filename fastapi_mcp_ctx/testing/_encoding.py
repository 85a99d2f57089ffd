"""What :class:`~fastapi_mcp_ctx.testing.McpTestClient` puts on the wire and how it reads an
error: the JSON-RPC message with each era's envelope and headers (2025: ``Mcp-Session-Id`` /
``MCP-Protocol-Version``; 2026-07-28: ``params._meta`` and the ``MCP-Protocol-Version`` /
``Mcp-Method`` / ``Mcp-Name`` headers, spec 2026-07-28 ``basic/transports/streamable-http``),
``Mcp-Param-*`` values, and :class:`~fastapi_mcp_ctx.errors.McpResponseError` from a response.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

import httpx

from .._discovery import find_targets
from .._wire.envelope import META_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_VERSION, NAME_MEMBER, encode_header_value
from ..errors import McpResponseError

__all__ = ["ACCEPT", "Outgoing", "header_params_of", "param_header", "param_headers", "response_error"]

ACCEPT: Final = "application/json, text/event-stream"


@dataclass(frozen=True, slots=True)
class Outgoing:
    """The client's side of the envelope: era, version, capabilities, info, log level, and the
    2025 headers (``MCP-Protocol-Version``, ``Mcp-Session-Id``) once the session exists."""

    era: Literal["legacy", "modern"]
    protocol_version: str
    client_capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any]
    log_level: str | None
    legacy_headers: Mapping[str, str]

    def message(
        self, method: str, params: Mapping[str, Any] | None, meta: Mapping[str, Any] | None, request_id: int | None
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The JSON-RPC request (``request_id``) or notification (None) and its HTTP headers."""
        body = dict(params) if params is not None else None
        sent = {"Content-Type": "application/json", "Accept": ACCEPT}
        if self.era == "modern":
            body = body or {}
            envelope: dict[str, Any] = {
                META_VERSION: self.protocol_version,
                META_CAPABILITIES: dict(self.client_capabilities),
                META_CLIENT_INFO: dict(self.client_info),
            }
            if self.log_level is not None:
                envelope[META_LOG_LEVEL] = self.log_level
            body["_meta"] = {**envelope, **(body.get("_meta") or {}), **(meta or {})}
            sent.update({"MCP-Protocol-Version": self.protocol_version, "Mcp-Method": method})
            member = NAME_MEMBER.get(method)
            if member is not None and isinstance(body.get(member), str):
                sent["Mcp-Name"] = encode_header_value(body[member])
        else:
            if meta:
                body = body or {}
                body["_meta"] = {**(body.get("_meta") or {}), **meta}
            if method != "initialize":
                sent.update(self.legacy_headers)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if request_id is not None:
            message["id"] = request_id
        if body is not None:
            message["params"] = body
        return message, sent


def param_header(value: Any) -> str | None:
    """The ``Mcp-Param-*`` value of an argument (bool, number, string), or None (not mirrored)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return encode_header_value(value) if isinstance(value, str) else None


def param_headers(header_params: Mapping[str, str], arguments: Mapping[str, Any]) -> dict[str, str]:
    """The ``Mcp-Param-{token}`` headers mirroring ``arguments`` (``header_params``: argument ->
    token, from :func:`header_params_of`); arguments absent or not mirrored are left out."""
    mirrored = {f"Mcp-Param-{token}": param_header(arguments.get(prop)) for prop, token in header_params.items()}
    return {name: value for name, value in mirrored.items() if value is not None}


def header_params_of(tool: Mapping[str, Any]) -> dict[str, str]:
    """``{argument: header token}`` for a ``Tool``'s ``x-mcp-header`` arguments."""
    properties = cast(dict[str, Any], cast(dict[str, Any], tool.get("inputSchema") or {}).get("properties") or {})
    return {
        prop: spec["x-mcp-header"]
        for prop, spec in properties.items()
        if isinstance(spec, dict) and isinstance(cast(dict[str, Any], spec).get("x-mcp-header"), str)
    }


def response_error(method: str, response: httpx.Response, final: Mapping[str, Any] | None, app: Any = None) -> McpResponseError:
    """The :class:`McpResponseError` of an error answer: the JSON-RPC ``error`` of ``final``, or
    the start of the HTTP body when there is none. A bare 404 says what to fix: ``app`` (the app
    under test) has no ``McpRouter``, or the path is not the router's."""
    raw = final.get("error") if final is not None else None
    error = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
    code = error.get("code")
    text = response.text[:500] or f"HTTP {response.status_code} without a JSON-RPC answer"
    if response.status_code == 404 and not error:  # the app has no route there
        where = response.request.url.path
        if isinstance(getattr(app, "routes", None), list) and not find_targets(app):
            text += f" (no MCP endpoint at {where}: the app has no McpRouter; add one with app.include_router(McpRouter()))"
        else:
            text += (
                f" (no MCP endpoint at {where}: a router included with a prefix serves "
                "<prefix>/mcp; pass it as McpTestClient(app, path=...))"
            )
    message = str(error["message"]) if "message" in error else text
    data = error.get("data")
    paths = cast(dict[str, Any], data).get("mcpPaths") if isinstance(data, dict) else None
    if response.status_code == 404 and isinstance(paths, list) and paths:  # the app's pointer (_server.lost_requests)
        message += f"; pass McpTestClient(app, path={cast(list[Any], paths)[0]!r})"
    return McpResponseError(
        code=code if isinstance(code, int) else None,
        message=message,
        data=error.get("data"),
        http_status=response.status_code,
        headers=dict(response.headers),
        method=method,
    )
