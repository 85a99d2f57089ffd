"""Running the ``authenticate`` dependency of ``McpRouter`` once per MCP HTTP request.

The dependency is solved by FastAPI's own solver like any path-operation dependency: its
``BackgroundTasks`` run after the response, headers it sets through a ``Response`` parameter
are sent, and it reads the (already read, replayed) body like any dependency. An
``HTTPException`` keeps its meaning: 401 → :class:`AuthenticationError` with the exception's
headers exactly as raised (``WWW-Authenticate: ApiKey`` stays; none stays none, unless the
router is in a bearer mode and the exception names no challenge: then the bearer challenge), 403 →
:class:`PermissionDeniedError`, another 4xx → :class:`RequestRejectedError` (status and
headers kept, e.g. 429 + ``Retry-After``), 5xx → :class:`InternalError` with that status and a
generic message. Spec 2025-11-25 ``basic/authorization`` §Error Handling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from fastapi.background import BackgroundTasks
from fastapi.dependencies.models import Dependant
from starlette.requests import Request
from starlette.responses import Response

from .._fastapi_compat import solve
from .._handlers.resolve import dependency_problems, from_http_exception
from .._transport.streams import CallResponse, StandaloneStream
from ..auth import Principal
from ..errors import AuthenticationError, InternalError, McpError, RequestRejectedError
from .http import BODY_SCOPE_KEY, replaying_receive

__all__ = ["AuthOutcome", "refusal", "resolve_principal"]


@dataclass(slots=True)
class AuthOutcome:
    """What ``authenticate`` produced: the principal (None: deny), its background tasks and the
    headers it set; :meth:`apply` hands the last two to the final response."""

    principal: Principal | None
    tasks: BackgroundTasks
    headers: Response

    def apply(self, response: Response) -> None:
        """Add the dependency's headers and background tasks to ``response``."""
        extra = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in self.headers.raw_headers if k != b"content-length"]
        if isinstance(response, (CallResponse, StandaloneStream)):
            response.add_headers(extra)
        else:
            for name, value in extra:
                response.headers.append(name, value)
        if not self.tasks.tasks:
            return
        background = response.background
        if isinstance(background, BackgroundTasks):
            background.tasks[:0] = self.tasks.tasks
        elif background is None:
            response.background = self.tasks
        else:
            self.tasks.tasks.append(background)  # type: ignore[arg-type]
            response.background = self.tasks


def _translate(exc: HTTPException, challenge: str | None) -> McpError:
    headers = dict(exc.headers or {})
    if exc.status_code == 401:  # as raised: an API-key scheme is no Bearer resource server
        if challenge is not None and not any(name.lower() == "www-authenticate" for name in headers):
            headers["WWW-Authenticate"] = challenge
        return AuthenticationError(str(exc.detail), headers=headers)
    translated = from_http_exception(exc)  # 403, as for a tool's dependencies
    if isinstance(translated, McpError):
        return translated
    if 400 <= exc.status_code < 500:
        return RequestRejectedError(exc.status_code, str(exc.detail), headers)
    error = InternalError(headers=headers)
    error.http_status = exc.status_code if exc.status_code >= 500 else 500
    return error


def refusal(challenge: str | None) -> AuthenticationError:
    """The 401 for an ``authenticate`` that returned None: ``WWW-Authenticate: <challenge>`` in a
    bearer mode, no challenge otherwise (the application's scheme is its own, e.g. an API key)."""
    headers = {"WWW-Authenticate": challenge} if challenge is not None else None
    message = "Unauthorized" if challenge is not None else "Unauthorized: the application's authenticate dependency refused the request"
    return AuthenticationError(message, headers=headers)


async def resolve_principal(dependant: Dependant, request: Request, challenge: str | None = None) -> AuthOutcome:
    """Solve the ``authenticate`` graph (its single value is named ``principal``) for ``request``.

    ``challenge``: the ``WWW-Authenticate`` value of a bearer mode (``MCP_AUTH_MODE=jwt|oauth``
    or ``MCP_RESOURCE_URL`` set), sent with a 401 that names no challenge; None: none is added.

    Raises:
        AuthenticationError / PermissionDeniedError / RequestRejectedError / InternalError:
            translated from an ``HTTPException`` (or a failed ``Header``… → 401
            ``Invalid credentials: header.x-api-key: Field required``, naming each parameter, never its value).
        TypeError: the dependency returned something other than a Principal or None.
    """
    tasks = BackgroundTasks()
    headers = Response()
    body: bytes = request.scope.get(BODY_SCOPE_KEY, b"")
    auth_request = Request(dict(request.scope), replaying_receive(body, request.receive))
    try:
        async with solve(dependant, auth_request, request.scope.get("app"), tasks, headers) as solved:
            if solved.errors:
                raise AuthenticationError(  # which Header()/Query()… is missing or invalid, as for a tool's dependency
                    f"Invalid credentials: {dependency_problems(solved.errors)}",
                    headers={"WWW-Authenticate": challenge} if challenge else None,
                )
            principal: Any = solved.values["principal"]
    except HTTPException as exc:
        raise _translate(exc, challenge) from exc
    if principal is not None and not isinstance(principal, Principal):
        raise TypeError(f"authenticate must return a Principal or None, got {type(principal).__name__}")
    return AuthOutcome(principal, tasks, headers)
