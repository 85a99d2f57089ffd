"""RFC 9728 Protected Resource Metadata and the ``WWW-Authenticate`` challenges that point to it.

The document names the ``resource`` (``MCP_RESOURCE_URL`` exactly, never derived from the
request's ``Host``), its ``authorization_servers`` (``MCP_OAUTH_ISSUER``, else
``MCP_JWT_ISSUER``), the ``scopes_supported`` (every scope a registered tool, resource or
prompt declares) and ``bearer_methods_supported: ["header"]``. It is served, without
authentication and with CORS open to any origin (``GET`` and ``OPTIONS``), at

``/.well-known/oauth-protected-resource`` + the resource URL's path (RFC 9728 §3.1: the
well-known segment is inserted between host and path: ``…/oauth-protected-resource/mcp``), and
only there: the root ``/.well-known/oauth-protected-resource`` is served only when the resource
is the host's root, because RFC 9728 §3.3 has a client reject a document whose ``resource`` is
not the URL it derived the metadata URL from (issue 24 item 13: the root answered
``resource: …/mcp``). ``WWW-Authenticate: Bearer resource_metadata=`` names the path-suffixed URL.

The path belongs at the host's root whatever prefix the MCP route has: the router carries
them at root paths, and when it is included under a prefix (``include_router(r, prefix=…)``,
where every route of the router gets the prefix) :func:`ensure_root_routes` adds them to the
application's own routes the first time the MCP endpoint serves a request (the first 401 a
client sees names them). ``mcp_router.serve_metadata(app)`` does the same eagerly.

Spec 2025-11-25 ``basic/authorization`` §Protected Resource Metadata Discovery Requirements,
§Scope Challenge Handling; RFC 6750 §3 (the challenge syntax).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._fastapi_routes import flat_routes
from ..settings import McpSettings

__all__ = ["WELL_KNOWN", "challenge", "ensure_root_routes", "metadata_document", "metadata_routes", "metadata_url"]

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
_CORS: Final = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, OPTIONS",
    "Access-Control-Allow-Headers": "*",
    "Cache-Control": "public, max-age=300",
}


def _suffix(resource_url: str) -> str:
    return urllib.parse.urlsplit(resource_url).path.rstrip("/")


def metadata_url(resource_url: str) -> str:
    """The path-inserted metadata URL of ``resource_url`` (RFC 9728 §3.1)."""
    parts = urllib.parse.urlsplit(resource_url)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{_suffix(resource_url)}"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(settings: McpSettings, *, error: str | None = None, scope: Iterable[str] = (), description: str | None = None) -> str:
    """A ``WWW-Authenticate`` value: ``Bearer resource_metadata="…"[, error="…"][, scope="…"]``.

    ``resource_metadata`` appears when ``MCP_RESOURCE_URL`` is set; ``error`` is
    ``invalid_token`` (a token was sent and refused) or ``insufficient_scope``.
    """
    params: list[str] = []
    if error is not None:
        params.append(f"error={_quoted(error)}")
    scopes = " ".join(sorted(set(scope)))
    if scopes:
        params.append(f"scope={_quoted(scopes)}")
    if settings.resource_url:
        params.append(f"resource_metadata={_quoted(metadata_url(settings.resource_url))}")
    if description is not None:
        params.append(f"error_description={_quoted(description)}")
    return "Bearer " + ", ".join(params) if params else "Bearer"


def _is_issuer_url(value: str) -> bool:
    parts = urllib.parse.urlsplit(value)
    return parts.scheme in ("https", "http") and bool(parts.netloc) and not parts.query and not parts.fragment


def metadata_document(settings: McpSettings, scopes_supported: Iterable[str]) -> dict[str, Any]:
    """The RFC 9728 §2 document (``resource_url`` must be set). ``authorization_servers`` holds
    issuer identifiers, which are URLs (RFC 8414 §2): a ``MCP_JWT_ISSUER`` that is none (``dev``,
    a bare name some identity providers use) verifies ``iss`` but is not advertised."""
    servers = [s for s in (settings.oauth_issuer or settings.jwt_issuer,) if s and _is_issuer_url(s)]
    document: dict[str, Any] = {
        "resource": settings.resource_url,
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
        "resource_name": settings.server_name,
    }
    scopes = sorted(set(scopes_supported))
    if scopes:
        document["scopes_supported"] = scopes
    return document


def metadata_routes(settings: McpSettings, scopes_supported: Callable[[], Iterable[str]]) -> list[Route]:
    """The metadata route at the RFC 9728 §3.1 URL of ``MCP_RESOURCE_URL`` (empty when unset):
    ``/.well-known/oauth-protected-resource/mcp`` for ``…/mcp``, the root form for a root resource."""
    if not settings.resource_url:
        return []

    async def serve(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=_CORS)
        return JSONResponse(metadata_document(settings, scopes_supported()), headers=_CORS)

    path = WELL_KNOWN + _suffix(settings.resource_url)
    return [Route(path, serve, methods=["GET", "OPTIONS"], name=f"oauth_protected_resource{path}")]


def ensure_root_routes(app: Any, routes: list[Route]) -> None:
    """Add ``routes`` to ``app``'s own routes when no route of ``app`` serves their path yet
    (the router was included under a prefix). Idempotent; ``app`` without routes is left alone."""
    router = getattr(app, "router", None)
    existing = getattr(router, "routes", None)
    if not isinstance(existing, list):
        return
    taken = {path for path, _ in flat_routes(existing)}  # pyright: ignore[reportUnknownArgumentType]
    for route in routes:
        if route.path not in taken:
            existing.insert(0, route)  # pyright: ignore[reportUnknownMemberType]
