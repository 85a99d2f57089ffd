"""Who is calling: the :class:`Principal` an ``authenticate`` dependency returns.

``McpRouter(authenticate=dep)`` resolves ``dep`` (any FastAPI dependency: it may use
``Security``, ``Header``, ``Depends`` …) once per MCP HTTP request, before dispatch. It returns
a :class:`Principal`, or raises ``HTTPException(401)`` / ``(403)``; returning None is a 401.
The principal becomes ``ctx.auth``; its ``tenant_id`` scopes ``ctx.state`` (None: the state
refuses, fail closed); 2025 sessions are bound to its tenant and ``subject`` (another caller
presenting the session id gets 404, as if the session did not exist: spec 2025-11-25
``basic/security_best_practices`` §Session Hijacking).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    Attributes:
        subject: stable id of the caller (JWT ``sub``); sessions are bound to it and the tenant.
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

    @property
    def owner_key(self) -> str:
        """What a 2025 session is bound to: tenant and subject together (a subject is often
        unique only within its tenant). A refreshed token of the same caller keeps the session."""
        return json.dumps([self.tenant_id, self.subject])

    def __post_init__(self) -> None:
        if not isinstance(self.subject, str) or not self.subject:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("Principal.subject must be a non-empty str")
        if self.tenant_id is not None and not isinstance(self.tenant_id, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("Principal.tenant_id must be a str or None (convert UUIDs and numbers)")
