"""Who is calling: the :class:`Principal` an ``authenticate`` dependency returns.

``McpRouter(authenticate=dep)`` resolves ``dep`` (any FastAPI dependency: it may use
``Security``, ``Header``, ``Depends`` …) once per MCP HTTP request, before dispatch. It returns
a :class:`Principal`, or raises ``HTTPException(401)`` / ``(403)``; returning None is a 401.
The principal becomes ``ctx.auth``; its ``tenant_id`` scopes ``ctx.state`` (None: the state
refuses, fail closed); 2025 sessions are bound to its ``subject`` (another subject presenting
the session id gets 404, as if the session did not exist: spec 2025-11-25
``basic/security_best_practices`` §Session Hijacking).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    Attributes:
        subject: stable id of the caller (JWT ``sub``); sessions are bound to it.
        tenant_id: the caller's tenant (JWT ``tid``), None when the credential has none.
        client_id: the OAuth client the credential was issued to, if known.
        scopes: granted scopes.
        claims: every claim of the credential (read-only).
    """

    subject: str
    tenant_id: str | None = None
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
