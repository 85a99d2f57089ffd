"""Admission of one MCP HTTP request when no ``McpRouter(authenticate=...)`` is given.

Chosen once from ``MCP_AUTH_MODE`` (:func:`build_gate`):

* ``none``: no gate at all (nothing runs per request);
* ``jwt`` / ``oauth``: the bearer token is verified (:class:`~fastapi_mcp_ctx._auth.bearer.JwtVerifier`)
  and its principal is the caller;
* unset: secure by default. A request is served only when it is local: its peer is a
  loopback address and it carries no header a proxy adds (:data:`PROXY_MARKERS`: a reverse
  proxy on the same machine connects from loopback too). Anything else gets 403
  (:class:`~fastapi_mcp_ctx.errors.RemoteAccessDeniedError`) naming ``MCP_AUTH_MODE``. An
  HTTP-level FastAPI dependency on the MCP route (``FastAPI(dependencies=...)``,
  ``APIRouter(dependencies=...)``, ``include_router(r, dependencies=...)``) never lifts this
  gate: a dependency may authenticate or may open a database session, and nothing tells the
  two apart. A proxy that adds none of the markers cannot be told from a local client: behind
  a proxy, configure authentication.

``authenticate=`` wins over ``MCP_AUTH_MODE``: with it no gate is built. A router that serves
non-local callers because of an explicit setting says so once, at the app's start-up
(:func:`announce_admission`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from starlette.requests import Request

from ..auth import Principal
from ..errors import RemoteAccessDeniedError
from ..settings import McpSettings
from .host_rules import is_loopback_host

if TYPE_CHECKING:
    from .bearer import JwtVerifier

__all__ = ["PROXY_MARKERS", "RequestGate", "announce_admission", "build_gate"]

logger = logging.getLogger("fastapi_mcp_ctx")
PROXY_MARKERS: Final[frozenset[str]] = frozenset(
    {
        "forwarded",  # RFC 7239
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",  # nginx's usual proxy_set_header
        "via",  # RFC 9110 §7.6.3
        "true-client-ip",  # Akamai, Cloudflare Enterprise
        "cf-connecting-ip",  # Cloudflare
    }
)
"""Request headers (lower case) that only a proxy adds: a request carrying one is not local."""


class RequestGate:
    """Admits or refuses one request (see the module docstring).

    Args:
        verifier: the JWT verifier (``jwt`` / ``oauth``), or None for the local-only default.
    """

    def __init__(self, verifier: JwtVerifier | None) -> None:
        self.verifier = verifier

    async def admit(self, request: Request, headers: Mapping[str, str]) -> Principal | None:
        """The caller's principal (None: anonymous local caller).

        Raises:
            AuthenticationError / InvalidTokenError: no or a bad bearer token (401).
            IdentityProviderUnavailableError: no signing key can be fetched (503).
            RemoteAccessDeniedError: no authentication configured and not local (403).
        """
        if self.verifier is not None:
            return await self.verifier.verify(headers.get("authorization"))
        self.refuse_remote(request, headers)
        return None

    @staticmethod
    def refuse_remote(request: Request, headers: Mapping[str, str]) -> None:
        """The local-only default's whole admission (no verifier), with nothing to await: the
        request is local when its peer is a loopback address and it carries none of the
        :data:`PROXY_MARKERS` headers.

        Raises:
            RemoteAccessDeniedError: 403, the request is not local.
        """
        client = request.scope.get("client")
        if not client or not is_loopback_host(str(client[0])) or not PROXY_MARKERS.isdisjoint(headers):
            raise RemoteAccessDeniedError()


def build_gate(settings: McpSettings, authenticated: bool, scopes_supported: Callable[[], Iterable[str]]) -> RequestGate | None:
    """The gate for ``settings`` (None: ``MCP_AUTH_MODE=none`` or ``authenticate=`` given).

    Raises:
        ConfigurationError: ``jwt`` / ``oauth`` settings missing or contradictory (start-up).
    """
    if authenticated or settings.auth_mode == "none":
        return None
    if settings.auth_mode in ("jwt", "oauth"):  # the verifier (and urllib for JWKS) loads only in these modes
        from .bearer import JwtVerifier  # noqa: PLC0415 - deferred on purpose: JWT modes only

        return RequestGate(JwtVerifier(settings, scopes_supported))
    return RequestGate(None)


def announce_admission(settings: McpSettings, authenticated: bool, path: str) -> None:
    """Log, once per router at the app's start-up (its first request if the lifespan does not
    run), who the router at ``path`` serves beyond local callers and which setting made it so
    (nothing for the local-only default)."""
    if authenticated:
        logger.info("McpRouter at %s serves non-local callers authenticated by McpRouter(authenticate=...)", path)
    elif settings.auth_mode == "none":
        logger.warning(
            "McpRouter at %s serves non-local callers WITHOUT authentication: MCP_AUTH_MODE=none is set "
            "(unset it, or set MCP_AUTH_MODE=jwt / oauth or McpRouter(authenticate=...), to require credentials)",
            path,
        )
    elif settings.auth_mode in ("jwt", "oauth"):
        logger.info("McpRouter at %s serves non-local callers with a verified bearer token (MCP_AUTH_MODE=%s)", path, settings.auth_mode)
