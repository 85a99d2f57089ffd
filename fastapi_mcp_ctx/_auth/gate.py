"""Admission of one MCP HTTP request when no ``McpRouter(authenticate=...)`` is given.

Chosen once from ``MCP_AUTH_MODE`` (:func:`build_gate`):

* ``none``: no gate at all (nothing runs per request);
* ``jwt`` / ``oauth``: the bearer token is verified (:class:`~fastapi_mcp_ctx._auth.bearer.JwtVerifier`)
  and its principal is the caller;
* unset: secure by default. A request is served only when it is local: its peer is a
  loopback address and it carries neither ``Forwarded`` nor ``X-Forwarded-For`` (a reverse
  proxy on the same machine connects from loopback too); or when an HTTP-level dependency
  guards the MCP route (``app.include_router(mcp_router, dependencies=[...])``), which is the
  application's own authentication. Anything else gets 403
  (:class:`~fastapi_mcp_ctx.errors.RemoteAccessDeniedError`) naming ``MCP_AUTH_MODE``.

``authenticate=`` wins over ``MCP_AUTH_MODE``: with it no gate is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from starlette.requests import Request

from .._fastapi_compat import LEAN_SCOPE_KEY
from ..auth import Principal
from ..errors import RemoteAccessDeniedError
from ..settings import McpSettings
from .host_rules import is_loopback_host

if TYPE_CHECKING:
    from .bearer import JwtVerifier

__all__ = ["RequestGate", "build_gate", "is_local"]


def is_local(request: Request, headers: Mapping[str, str]) -> bool:
    """Loopback peer and no proxy header (``Forwarded``, ``X-Forwarded-For``)."""
    client = request.scope.get("client")
    if not client or not is_loopback_host(str(client[0])):
        return False
    return "forwarded" not in headers and "x-forwarded-for" not in headers


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
        if LEAN_SCOPE_KEY in request.scope and not is_local(request, headers):
            raise RemoteAccessDeniedError()
        return None


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
