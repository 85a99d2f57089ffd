"""Which 2025 sessions subscribed to which resource URIs (``resources/subscribe``).

``notifications/resources/updated`` goes only to the sessions subscribed to that URI, each on
its own GET stream, never to every session (known fault B44; spec 2025-11-25
``server/resources`` §Subscriptions, ``basic/transports`` §Multiple Connections). The
registry is a small Protocol so several replicas can share one (a Redis twin implements the
same five methods); :class:`MemoryResourceSubscriptions` is the in-process one.

The ``resources/subscribe`` / ``resources/unsubscribe`` methods call :meth:`subscribe` /
:meth:`unsubscribe` after checking the caller may read the resource; ending a session
(``DELETE``, idle expiry) calls :meth:`drop_session`. 2026-07-28 has no such registry: a
``subscriptions/listen`` stream carries its own URIs (:mod:`.listen`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["MemoryResourceSubscriptions", "ResourceSubscriptions", "SessionAddress"]

@dataclass(frozen=True, slots=True)
class SessionAddress:
    """Where a 2025 session's notifications go: its tenant and its ``Mcp-Session-Id``."""

    tenant_id: str | None
    session_id: str


@runtime_checkable
class ResourceSubscriptions(Protocol):
    """URI subscriptions per 2025 session. URIs match exactly (no prefix or template match)."""

    async def subscribe(self, session: SessionAddress, uri: str) -> None:
        """Record that ``session`` wants ``notifications/resources/updated`` for ``uri``
        (idempotent). Raises ``OverflowError`` beyond the per-session limit."""
        ...

    async def unsubscribe(self, session: SessionAddress, uri: str) -> bool:
        """Forget one subscription; False when there was none."""
        ...

    async def subscribers(self, uri: str) -> list[SessionAddress]:
        """The sessions subscribed to ``uri`` (each once)."""
        ...

    async def uris(self, session_id: str) -> list[str]:
        """The URIs ``session_id`` is subscribed to, in subscription order."""
        ...

    async def drop_session(self, session_id: str) -> None:
        """Forget every subscription of an ended session."""
        ...


class MemoryResourceSubscriptions:
    """In-process :class:`ResourceSubscriptions`.

    Args:
        max_per_session: URIs one session may hold at most (``OverflowError`` beyond).
    """

    def __init__(self, *, max_per_session: int = 1000) -> None:
        self._max = max_per_session
        self._by_session: dict[str, tuple[SessionAddress, dict[str, None]]] = {}
        self._by_uri: dict[str, dict[str, SessionAddress]] = {}

    async def subscribe(self, session: SessionAddress, uri: str) -> None:
        entry = self._by_session.get(session.session_id)
        if entry is None:
            entry = self._by_session[session.session_id] = (session, {})
        uris = entry[1]
        if uri in uris:
            return
        if len(uris) >= self._max:
            raise OverflowError(f"A session may subscribe to at most {self._max} resources")
        uris[uri] = None
        self._by_uri.setdefault(uri, {})[session.session_id] = session

    async def unsubscribe(self, session: SessionAddress, uri: str) -> bool:
        entry = self._by_session.get(session.session_id)
        if entry is None or uri not in entry[1]:
            return False
        del entry[1][uri]
        if not entry[1]:
            del self._by_session[session.session_id]
        self._forget(uri, session.session_id)
        return True

    async def subscribers(self, uri: str) -> list[SessionAddress]:
        return list(self._by_uri.get(uri, {}).values())

    async def uris(self, session_id: str) -> list[str]:
        entry = self._by_session.get(session_id)
        return list(entry[1]) if entry is not None else []

    async def drop_session(self, session_id: str) -> None:
        entry = self._by_session.pop(session_id, None)
        if entry is None:
            return
        for uri in entry[1]:
            self._forget(uri, session_id)

    def _forget(self, uri: str, session_id: str) -> None:
        holders = self._by_uri.get(uri)
        if holders is not None:
            holders.pop(session_id, None)
            if not holders:
                del self._by_uri[uri]
