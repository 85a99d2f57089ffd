"""A pointer for lost MCP requests: the 404 of a request that reached no route names the MCP path.

An MCP client pointed at a wrong path (``/`` instead of ``/mcp``, a forgotten prefix) would get
the app's bare 404 and no clue. :func:`install_pointer` wraps the app's router's ``default``
(what Starlette and FastAPI call when no route matched, before the app's 404 handling) once:

* a request that looks like MCP gets ``404`` with a JSON-RPC error body naming the path(s)
  the app's ``McpRouter`` serves (``-32600``, ``data.mcpPaths``, ``data.path``): it carries
  ``Mcp-Session-Id`` or ``MCP-Protocol-Version``, or it is a ``POST`` whose ``Accept`` lists both
  ``application/json`` and ``text/event-stream`` (what the Streamable HTTP transport requires of
  clients), or a ``POST`` of ``application/json`` whose body is a JSON-RPC request or
  notification (read up to :data:`MAX_SNIFF_BYTES` within :data:`SNIFF_SECONDS`; the id is echoed).
  The body is looked at without a Python-recursive parse: it must open with ``{`` or ``[{`` and
  is then read by ``pydantic_core.from_json`` (the JSON-RPC front door's parser, whose nesting
  depth is bounded), so no body (200 000 ``[``, a deeply nested object) can make it a 500.
  The paths named are the ones a client sends to: the scope's ``root_path`` (an ``app.mount``
  prefix, a proxy's ``--root-path``) before the app's own route paths;
* anything else goes to the original ``default`` with its body replayed, so the app's other
  404s (its own 404 exception handler, FastAPI's ``{"detail": "Not Found"}``) are unchanged.

Installed by ``McpEndpoint.start`` (at ``McpRouter``'s lifespan, which an app that includes it
runs, or at the endpoint's first request). Spec 2025-11-25 ``basic/transports`` §Streamable HTTP (one MCP endpoint path).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Final, cast

import anyio
from pydantic_core import from_json
from starlette.types import Message, Receive, Scope, Send

from .._fastapi_routes import LeanRoute, flat_routes
from .._transport.streams import Reply
from .._wire.envelope import header_map
from .._wire.jsonrpc import error_message
from ..errors import InvalidRequestError
from .outcomes import json_reply

__all__ = ["MAX_SNIFF_BYTES", "SNIFF_SECONDS", "install_pointer", "mcp_paths"]

MAX_SNIFF_BYTES: Final = 1024 * 1024
"""How much of an unmatched JSON POST body is read to see whether it is JSON-RPC (bytes)."""
SNIFF_SECONDS: Final = 10.0
"""How long reading that body may take (seconds); a slower body is not looked at."""

_MARK: Final = "_fastapi_mcp_ctx_pointer"
_JSON_SPACE: Final = b" \t\r\n"  # RFC 8259 §2 insignificant whitespace
ASGIApp = Callable[[Scope, Receive, Send], Coroutine[Any, Any, None]]


def mcp_paths(app: Any) -> list[str]:
    """The full paths of the MCP endpoints among ``app``'s routes (included routers flattened)."""
    paths = [path for path, route in flat_routes(getattr(app, "routes", [])) if isinstance(route, LeanRoute) and path]
    return sorted(set(paths))


def _mcp_headers(scope: Scope) -> bool:
    headers = header_map(scope.get("headers", []))
    if "mcp-session-id" in headers or "mcp-protocol-version" in headers:
        return True
    accept = headers.get("accept", "").lower()
    return scope.get("method") == "POST" and "application/json" in accept and "text/event-stream" in accept


def _json_post(scope: Scope) -> bool:
    if scope.get("method") != "POST":
        return False
    content_type = header_map(scope.get("headers", [])).get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


async def _read_some(receive: Receive) -> tuple[list[Message], bytes, bool]:
    """The body's messages, its bytes and whether it was read whole (within :data:`MAX_SNIFF_BYTES`
    and :data:`SNIFF_SECONDS`)."""
    messages: list[Message] = []
    size = 0
    with anyio.move_on_after(SNIFF_SECONDS):
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages, b"", False
            size += len(message.get("body", b""))
            if size > MAX_SNIFF_BYTES:
                return messages, b"", False
            if not message.get("more_body", False):
                return messages, b"".join(m.get("body", b"") for m in messages), True
    return messages, b"", False


def _opens_like_json_rpc(body: bytes) -> bool:
    """Whether ``body`` starts as a JSON-RPC message or batch can: ``{`` or ``[`` then ``{``
    (whitespace aside); anything else is no JSON-RPC whatever follows, and is not parsed."""
    text = body.lstrip(_JSON_SPACE)
    if text.startswith(b"["):
        text = text[1:].lstrip(_JSON_SPACE)
    return text.startswith(b"{")


def _json_rpc_id(body: bytes) -> tuple[bool, Any]:
    """Whether ``body`` is a JSON-RPC request or notification (or a batch of them), and its id.

    Never raises: bytes that are not UTF-8 JSON, or JSON nested deeper than ``pydantic_core``'s
    bound, are simply not JSON-RPC.
    """
    if not _opens_like_json_rpc(body):
        return False, None
    try:
        parsed: Any = from_json(body, allow_inf_nan=False)
    except (ValueError, RecursionError):
        return False, None
    batch = isinstance(parsed, list)
    first: Any = parsed
    if batch:
        members = cast("list[Any]", parsed)
        first = members[0] if members else None
    if not isinstance(first, dict):
        return False, None
    member = cast("dict[str, Any]", first)
    if member.get("jsonrpc") != "2.0" or not isinstance(member.get("method"), str):
        return False, None
    request_id: Any = None if batch else member.get("id")
    return True, request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


def install_pointer(app: Any) -> None:
    """Wrap ``app.router.default`` once so that lost MCP requests get a 404 naming the MCP path.

    Idempotent; an app without a Starlette router (``app.router.default``) is left alone.
    """
    router: Any = getattr(app, "router", None)
    original: ASGIApp | None = getattr(router, "default", None)
    if router is None or original is None or getattr(original, _MARK, False):
        return

    async def default(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await original(scope, receive, send)
            return
        lost, request_id = _mcp_headers(scope), None
        if _json_post(scope):
            messages, body, whole = await _read_some(receive)
            receive = _replay(messages, receive)
            if whole:
                is_rpc, request_id = _json_rpc_id(body)
                lost = lost or is_rpc
        prefix = str(scope.get("root_path", "")).rstrip("/")  # where the app is mounted (ASGI)
        paths = [prefix + mcp_path for mcp_path in mcp_paths(app)] if lost else []
        if not paths:
            await original(scope, receive, send)
            return
        path = scope.get("path", "")
        error = InvalidRequestError(
            f"No MCP endpoint at {path}: this server's MCP endpoint is {' or '.join(paths)} (send MCP requests there)",
            data={"path": path, "mcpPaths": paths},
        )
        error.http_status = 404
        await json_reply(Reply(error_message(request_id, error), 404))(scope, receive, send)

    setattr(default, _MARK, True)  # noqa: B010 - a marker attribute on a function
    router.default = default

