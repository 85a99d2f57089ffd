"""Who calls over stdio: the router's ``authenticate=`` (or bearer gate) run on each synthetic request.

The stdio transport has one caller, the process that launched the server, and the headers given
at start-up (:mod:`.headers`). Each request runs the same admission as over HTTP, through
:func:`fastapi_mcp_ctx._server.authn.resolve_principal` (FastAPI's solver,
``app.dependency_overrides``, an ``HTTPException`` translated as over HTTP) or the
``MCP_AUTH_MODE=jwt|oauth`` gate; its principal goes into the request scope, where
``ctx.auth``, ``ctx.tenant_id`` and the app's own dependencies find it.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request

from .._server.authn import AuthOutcome, resolve_principal
from .._server.dispatch import PRINCIPAL_SCOPE_KEY
from .._wire.envelope import header_map
from ..auth import Principal
from ..errors import AuthenticationError

__all__ = ["STDIO_AUTH_HINT", "StdioAdmission"]

logger = logging.getLogger("fastapi_mcp_ctx.stdio")

STDIO_AUTH_HINT = (
    "stdio: the headers authenticate= reads come from --header NAME=VALUE or MCP_STDIO_HEADER_<NAME> "
    "in the server's environment (docs/stdio.md)"
)


class StdioAdmission:
    """Admit each request of one stdio connection.

    Args:
        authenticate: the router's ``authenticate=`` dependant (``McpEndpoint.authenticate``), or None.
        gate: the router's request gate (``McpEndpoint.gate``), or None.
        headers: the synthetic requests' headers (ASGI pairs).
    """

    def __init__(self, authenticate: Any, gate: Any, headers: list[tuple[bytes, bytes]]) -> None:
        self._authenticate = authenticate
        self._gate = gate
        self._headers = header_map(headers)

    async def admit(self, request: Request) -> tuple[Principal | None, AuthOutcome | None]:
        """The caller's principal (also put into ``request.scope``) and the dependency's outcome.

        Returns ``(None, None)`` when neither ``authenticate=`` nor a gate is configured.
        Raises:
            McpError: the refusal, as over HTTP: ``AuthenticationError`` (-32001) for a 401 or
                ``authenticate`` returning None (its message then says where stdio's headers come
                from), ``PermissionDeniedError`` for a 403, ``RequestRejectedError`` for another 4xx.
        """
        outcome: AuthOutcome | None = None
        principal: Principal | None
        try:
            if self._authenticate is not None:
                outcome = await resolve_principal(self._authenticate, request)
                principal = outcome.principal
                if principal is None:
                    raise AuthenticationError("Unauthorized")
            elif self._gate is not None and self._gate.verifier is not None:  # a bearer mode (jwt / oauth)
                principal = await self._gate.admit(request, self._headers)
            # else the local-only default: stdio's one caller is the process that launched the
            # server, local by construction, so there is no peer to check.
            else:
                return None, None
        except AuthenticationError as exc:
            exc.message = f"{exc.message} ({STDIO_AUTH_HINT})"
            raise
        if principal is not None:
            request.scope[PRINCIPAL_SCOPE_KEY] = principal
        return principal, outcome

    @staticmethod
    async def after(outcome: AuthOutcome | None) -> None:
        """Run the background tasks ``authenticate=`` added, after the answer (as HTTP does)."""
        if outcome is not None and outcome.tasks.tasks:
            try:
                await outcome.tasks()
            except Exception:
                logger.exception("stdio: a background task of authenticate failed")
