"""The in-process :class:`~.sessions.SessionStore` of 2025 sessions (``MCP_SESSION_STORE_URL``
``memory://``, the default): records kept compact in this process's memory, with idle expiry,
a size cap and a per-owner quota.

The session gate finds a live record inline (:meth:`MemorySessionStore.fresh_view`,
:meth:`MemorySessionStore.lookup`: no coroutine per request). Other workers and replicas cannot
see these sessions: an id this process does not hold is logged once with a hint at the shared
store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .sessions import OwnerQuotaExceeded, SessionRecord

__all__ = ["MemorySessionStore"]

_unknown_hinted = False  # the "unknown id" hint was logged in this process


class MemorySessionStore:
    """In-process :class:`SessionStore` with idle expiry and a size cap.

    Args:
        idle_seconds: a session unused for this many seconds is gone (404).
        max_sessions: ``create`` raises ``OverflowError`` beyond this many live sessions.
        max_per_owner: ``create`` raises :class:`OwnerQuotaExceeded` beyond this many live
            sessions of one owner (records with ``owner=None``, the anonymous caller, only
            count towards ``max_sessions``). None: no per-owner quota.
        pinned: ``pinned(session_id)`` True keeps the session from expiring (the router: its
            GET stream is open); its idle time restarts when it is no longer pinned.
        clock: time source in seconds (tests inject one).
    """

    def __init__(
        self,
        *,
        idle_seconds: float,
        max_sessions: int,
        max_per_owner: int | None = None,
        pinned: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._records: dict[str, SessionRecord] = {}
        self._idle = idle_seconds
        self._max = max_sessions
        self._max_per_owner = max_per_owner
        self._pinned = pinned
        self.clock = clock
        """The time source in seconds (read on each use: a test may replace it)."""

    def _expired(self, record: SessionRecord, now: float) -> bool:
        if self._pinned is not None and self._pinned(record.id):
            record.last_seen = now
            return False
        return now - record.last_seen > self._idle

    def _count(self, owner: str) -> int:
        return sum(1 for rec in self._records.values() if rec.owner == owner)

    def _sweep(self, now: float) -> None:
        for sid in [sid for sid, rec in self._records.items() if self._expired(rec, now)]:
            del self._records[sid]

    async def create(self, record: SessionRecord) -> None:
        now = self.clock()
        if len(self._records) >= self._max:
            self._sweep(now)
            if len(self._records) >= self._max:
                raise OverflowError("Too many open sessions")
        owner, limit = record.owner, self._max_per_owner
        if owner is not None and limit is not None and self._count(owner) >= limit:
            self._sweep(now)
            if self._count(owner) >= limit:
                raise OwnerQuotaExceeded(owner, limit)
        record.created_at = record.last_seen = now
        self._records[record.id] = record.compact()

    async def get(self, session_id: str) -> SessionRecord | None:
        return self.lookup(session_id)

    def fresh_view(self) -> tuple[dict[str, SessionRecord], float]:
        """``(records, idle_seconds)`` for a caller that finds a live session inline (the session
        gate, on every request): a record in ``records`` whose ``clock() - last_seen`` is at most
        ``idle_seconds`` is live, and the caller sets its ``last_seen`` to that ``clock()``; any
        other id goes through :meth:`lookup`. ``records`` is read, never written."""
        return self._records, self._idle

    def lookup(self, session_id: str) -> SessionRecord | None:
        """:meth:`get` without its coroutine (the session gate's per-request form: an in-memory
        lookup never waits)."""
        record = self._records.get(session_id)
        if record is None:
            self._hint_unknown()
            return None
        now = self.clock()
        # the idle check first: a record within its idle time lives on whether pinned or not
        # (both refresh last_seen), so the pinned lookup runs only for one that would expire
        if now - record.last_seen > self._idle and self._expired(record, now):
            del self._records[session_id]
            return None
        record.last_seen = now
        return record

    def _hint_unknown(self) -> None:
        """Once a process: an id this process never held (or already forgot) may come from another
        worker or replica, which in-memory sessions cannot see (the client then gets 404)."""
        global _unknown_hinted
        if not _unknown_hinted:
            _unknown_hinted = True
            logging.getLogger("fastapi_mcp_ctx").warning(
                "A 2025 request named an Mcp-Session-Id this process does not hold (expired, deleted, or opened by "
                "another process). Sessions are in this process's memory: if the app runs as several uvicorn workers "
                "or replicas, set MCP_SESSION_STORE_URL=redis://... so they share them (docs/deployment.md)"
            )

    async def update(self, record: SessionRecord) -> None:
        if record.id in self._records:
            self._records[record.id] = record.compact()

    async def delete(self, session_id: str) -> bool:
        return self._records.pop(session_id, None) is not None
