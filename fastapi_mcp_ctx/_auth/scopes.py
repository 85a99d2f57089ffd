"""Per-operation scopes: ``@mcp_router.tool(scopes=[...])`` (and resources, prompts).

A registration carries ``scopes`` (a frozenset, empty: no requirement). The one check is
:func:`require_scopes`: every scope must be granted to the caller's :class:`Principal`
(``MCP_AUTH_MODE=jwt``/``oauth`` or ``McpRouter(authenticate=...)``); otherwise
:class:`InsufficientScopeError`, HTTP 403 in both eras, with ``WWW-Authenticate: Bearer
error="insufficient_scope", scope="<the operation's scopes>", resource_metadata="…"`` (spec
2025-11-25 ``basic/authorization`` §Scope Challenge Handling), so a client can step up. Without
any principal (no authentication configured) a scoped operation is refused the same way: a
scope is a requirement, never a hint. :func:`may_use` is the same test without raising, used to
hide from listings what the caller may not use (``MCP_HIDE_UNAUTHORIZED_TOOLS``).

``scopes=`` adds to whatever ``Security(..., scopes=[...])`` dependencies the handler declares:
those run their own checks (FastAPI ``SecurityScopes``) when the handler is called.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from ..auth import Principal
from ..errors import InsufficientScopeError
from ..settings import McpSettings
from .resource_metadata import challenge

__all__ = ["Scoped", "may_use", "normalize_scopes", "require_scopes", "with_scopes"]


class Scoped(Protocol):
    """A registration (tool, resource, prompt definition) carrying ``scopes``."""

    scopes: frozenset[str]


S = TypeVar("S", bound=Scoped)


def with_scopes(definition: S, scopes: Iterable[str] | None) -> S:
    """``definition`` with its ``scopes`` set from a registration's ``scopes=`` (see
    :func:`normalize_scopes` for the errors raised)."""
    definition.scopes = normalize_scopes(scopes)
    return definition


def normalize_scopes(scopes: Iterable[str] | None) -> frozenset[str]:
    """``scopes=`` of a registration as a frozenset.

    Raises:
        TypeError: a str was given instead of a list (``scopes="a b"``), or an item is not a str.
        ValueError: an empty scope or one with spaces or quotes (RFC 6749 §3.3 scope-token).
    """
    if scopes is None:
        return frozenset()
    if isinstance(scopes, str):
        raise TypeError(f"scopes must be a list of strings, not the string {scopes!r}")
    result: set[str] = set()
    for scope in scopes:
        if not isinstance(scope, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"scopes must be strings, got {type(scope).__name__}")
        if not scope or any(c in scope for c in ' "\\') or not scope.isprintable():
            raise ValueError(f"invalid scope {scope!r}: a non-empty token without spaces, quotes or backslashes")
        result.add(scope)
    return frozenset(result)


def may_use(required: frozenset[str], principal: Principal | None) -> bool:
    """Whether ``principal`` holds every scope of ``required`` (True when nothing is required)."""
    if not required:
        return True
    return principal is not None and required <= principal.scopes


def require_scopes(required: frozenset[str], principal: Principal | None, settings: McpSettings) -> None:
    """Refuse the operation unless ``principal`` holds every scope of ``required``.

    Raises:
        InsufficientScopeError: HTTP 403 with the ``insufficient_scope`` challenge.
    """
    if may_use(required, principal):
        return
    needed = tuple(sorted(required))
    value = challenge(settings, error="insufficient_scope", scope=needed)
    raise InsufficientScopeError(needed, headers={"WWW-Authenticate": value})
