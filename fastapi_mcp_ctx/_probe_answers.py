"""What a probed server answered (``fastapi-mcp-ctx check``): the JSON-RPC messages of a JSON or
SSE body, the HTTP statuses that stop the probe, and the line that tells the operator what to do.

A 421 names the Host header sent and ``MCP_ALLOWED_HOSTS``; a 401 reads the challenge (RFC 9110
§11.6.1: a Bearer token, the application's own scheme, or none: its ``authenticate`` refused); a
403 passes on what the server says; a 404 names the MCP path the server points to, or the usual
``/mcp`` and ``include_router``; a redirect names its target (use that URL); a connect failure
names the operating system's reason. The exchanges themselves: ``_probe.py``.
"""

from __future__ import annotations

import json
from typing import Any, cast

import httpx

__all__ = ["ProbeFailure", "check_status", "connect_reason", "read_messages"]


class ProbeFailure(Exception):
    """A step failed; ``str(exc)`` is the line shown to the operator.

    Attributes:
        step: the exchange that failed (``initialize``, ``tools/list``…).
        fatal: the failure is the same for every era (connection, Host, credentials, path).
    """

    def __init__(self, message: str, step: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.step = step
        self.fatal = fatal


def read_messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a JSON or SSE response body."""
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        found: list[Any] = []
        for event in response.text.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:"))
            if data.strip():
                found.append(json.loads(data))
    elif content_type.startswith("application/json"):
        found = [response.json()]
    else:
        return []
    messages = [cast("dict[str, Any]", m) for m in found if isinstance(m, dict)]
    return [m for m in messages if m.get("jsonrpc") == "2.0"]


def check_status(response: httpx.Response, url: str, step: str) -> None:
    """Raise for an HTTP status that stops the probe (fatal for 421/401/403/404 without a
    JSON-RPC body); return to read the JSON-RPC body otherwise."""
    status = response.status_code
    host = response.request.headers.get("host") or httpx.URL(url).netloc.decode()  # the Host actually sent
    if status == 421:
        raise ProbeFailure(
            f"HTTP 421: the server's DNS-rebinding protection refused the Host header {host!r}; "
            "add it to MCP_ALLOWED_HOSTS on the server, or probe the address it was started with",
            step,
            fatal=True,
        )
    if status == 401:
        raise ProbeFailure(_unauthorized_advice(response), step, fatal=True)
    if status == 403:
        said = _error_message(response)
        reason = f": {said}" if said else " these credentials or this Origin"
        raise ProbeFailure(f"HTTP 403: the server refused{reason}", step, fatal=True)
    if status == 404 and (served := _served_paths(response)):  # the app's pointer (_server.lost_requests)
        right = str(httpx.URL(url).copy_with(path=served[0], query=None))
        raise ProbeFailure(
            f"HTTP 404: no MCP endpoint at {httpx.URL(url).path}; this server's MCP endpoint is {' or '.join(served)}: "
            f"fastapi-mcp-ctx check {right}",
            step,
            fatal=True,
        )
    if status == 404 and not _messages_or_empty(response):
        raise ProbeFailure(
            "HTTP 404: no MCP endpoint at this URL (the path is usually /mcp); if the path is right, the app may not "
            "include its McpRouter: app.include_router(mcp_router)",
            step,
            fatal=True,
        )
    if response.is_redirect:  # e.g. FastAPI's redirect_slashes: /mcp/ → /mcp
        location = response.headers.get("location")
        if not location:
            raise ProbeFailure(f"HTTP {status}: the server redirects without a Location header; check the URL", step, fatal=True)
        target = str(httpx.URL(url).join(location))
        raise ProbeFailure(
            f"HTTP {status}: the server redirects {httpx.URL(url).path} to {target}; MCP clients do not follow redirects "
            f"of a POST reliably, so use that URL: fastapi-mcp-ctx check {target}",
            step,
            fatal=True,
        )
    if status >= 500 and not _messages_or_empty(response):
        raise ProbeFailure(f"HTTP {status}: the server failed ({response.text[:200]!r})", step)


def _served_paths(response: httpx.Response) -> list[str]:
    """The MCP paths a 404's JSON-RPC error names (``data.mcpPaths``), if any."""
    for message in _messages_or_empty(response):
        error = message.get("error")
        data = cast("dict[str, Any]", error).get("data") if isinstance(error, dict) else None
        paths = cast("dict[str, Any]", data).get("mcpPaths") if isinstance(data, dict) else None
        if isinstance(paths, list):
            return [p for p in cast("list[Any]", paths) if isinstance(p, str) and p.startswith("/")]
    return []


def _unauthorized_advice(response: httpx.Response) -> str:
    """What to send after a 401, from the challenge received (RFC 9110 §11.6.1): a Bearer
    challenge asks for a token; another scheme is the application's own and is named; no
    challenge means the application's ``authenticate`` refused without saying how to pass."""
    challenge = response.headers.get("www-authenticate")
    said = _error_message(response)
    if not challenge or not challenge.strip():
        reason = f" ({said})" if said else ""
        return (
            f"HTTP 401: the server's authenticate dependency refused the request{reason} and named no scheme "
            "(no WWW-Authenticate): pass the credentials the application expects, e.g. -H 'X-API-Key: <key>'"
        )
    scheme = challenge.strip().split(None, 1)[0].rstrip(",")
    if scheme.lower() == "bearer":
        return f"HTTP 401: the server requires a bearer token (WWW-Authenticate: {challenge}); pass -H 'Authorization: Bearer <token>'"
    return (
        f"HTTP 401: the server requires its own {scheme!r} credentials (WWW-Authenticate: {challenge}); "
        f"pass them as that scheme says, e.g. -H 'Authorization: {scheme} <credentials>'"
    )


def _error_message(response: httpx.Response) -> str | None:
    """The message of the JSON-RPC error in ``response`` (what the server says to do), if any."""
    for message in _messages_or_empty(response):
        error = message.get("error")
        if isinstance(error, dict) and isinstance(text := cast("dict[str, Any]", error).get("message"), str):
            return text[:300]
    return None


def _messages_or_empty(response: httpx.Response) -> list[dict[str, Any]]:
    try:
        return read_messages(response)
    except ValueError:
        return []


def connect_reason(exc: BaseException) -> str:
    """The operating system's reason behind a connect failure ("connection refused"…)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror.lower()
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__
