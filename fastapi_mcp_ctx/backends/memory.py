"""In-process backend: a dict plus a sorted key list and an expiry heap.

For tests, single-process servers and stdio. Nothing is shared between processes and
nothing survives a restart; :meth:`MemoryBackend.aclose` keeps the data (it is the store,
not a connection to one). Every method runs without awaiting in the middle, so each is
atomic with respect to other tasks on the loop (``take`` included) without a lock.
"""

from __future__ import annotations

import heapq
import time
from bisect import bisect_left, bisect_right, insort
from collections.abc import Mapping, Sequence

from .base import Clock, prefix_upper_bound

__all__ = ["MemoryBackend"]


class MemoryBackend:
    """A :class:`~fastapi_mcp_ctx.backends.base.StateBackend` held in process memory.

    Args:
        clock: wall clock in seconds (``time.time``); tests inject a fake one to move TTLs.

    Expired entries are invisible at once and freed lazily: each call first drops the
    entries whose expiry has passed (an expiry heap, amortised O(log n)).
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or time.time
        self._data: dict[str, tuple[str, float | None]] = {}
        self._keys: list[str] = []  # sorted
        self._expiry: list[tuple[float, str]] = []  # heap of (expires_at, key)

    # ------------------------------------------------------------------ internals
    def _purge(self) -> float:
        now = self._clock()
        heap = self._expiry
        while heap and heap[0][0] <= now:
            expires_at, key = heapq.heappop(heap)
            entry = self._data.get(key)
            if entry is not None and entry[1] == expires_at:
                self._remove(key)
        return now

    def _remove(self, key: str) -> tuple[str, float | None] | None:
        entry = self._data.pop(key, None)
        if entry is not None:
            i = bisect_left(self._keys, key)
            del self._keys[i]
        return entry

    def _put(self, key: str, value: str, expires_at: float | None) -> None:
        if key not in self._data:
            insort(self._keys, key)
        self._data[key] = (value, expires_at)
        if expires_at is not None:
            heapq.heappush(self._expiry, (expires_at, key))

    @staticmethod
    def _live(entry: tuple[str, float | None] | None, now: float) -> bool:
        return entry is not None and (entry[1] is None or entry[1] > now)

    # ------------------------------------------------------------------ protocol
    async def get(self, key: str) -> str | None:
        """See :meth:`StateBackend.get`."""
        now = self._purge()
        entry = self._data.get(key)
        return entry[0] if entry is not None and self._live(entry, now) else None

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """See :meth:`StateBackend.get_many`."""
        now = self._purge()
        found: dict[str, str] = {}
        for key in keys:
            entry = self._data.get(key)
            if entry is not None and self._live(entry, now):
                found[key] = entry[0]
        return found

    async def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set`."""
        now = self._purge()
        self._put(key, value, None if ttl is None else now + ttl)

    async def set_many(self, items: Mapping[str, str], ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set_many`."""
        now = self._purge()
        expires_at = None if ttl is None else now + ttl
        for key, value in items.items():
            self._put(key, value, expires_at)

    async def delete(self, key: str) -> bool:
        """See :meth:`StateBackend.delete`."""
        now = self._purge()
        return self._live(self._remove(key), now)

    async def delete_many(self, keys: Sequence[str]) -> int:
        """See :meth:`StateBackend.delete_many`."""
        now = self._purge()
        return sum(1 for key in dict.fromkeys(keys) if self._live(self._remove(key), now))

    async def take(self, key: str) -> str | None:
        """See :meth:`StateBackend.take`."""
        now = self._purge()
        entry = self._remove(key)
        return entry[0] if entry is not None and self._live(entry, now) else None

    async def scan(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, str]]:
        """See :meth:`StateBackend.scan`."""
        now = self._purge()
        keys = self._keys
        start = bisect_right(keys, after) if after is not None and after >= prefix else bisect_left(keys, prefix)
        stop = bisect_left(keys, prefix_upper_bound(prefix)) if prefix else len(keys)
        out: list[tuple[str, str]] = []
        for key in keys[start:stop]:
            if len(out) >= limit:
                break
            value, expires_at = self._data[key]
            if expires_at is None or expires_at > now:
                out.append((key, value))
        return out

    async def aclose(self) -> None:
        """Nothing to release: the entries stay, as they would in Redis or SQL.

        The backend holds no connection and no event-loop resource, so it serves any loop
        before and after ``aclose`` with the same data. Empty it with
        :func:`fastapi_mcp_ctx.state.clear_state` (in tests:
        :func:`fastapi_mcp_ctx.testing.reset_state`); the data ends with the process.
        """
        self._purge()

    async def check(self) -> None:
        """See :meth:`StateBackend.check`: always usable."""
