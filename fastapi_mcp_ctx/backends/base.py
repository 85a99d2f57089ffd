"""The storage Protocol every ``ctx.state`` backend implements, and its shared helpers.

A backend is a plain key-value store of already-namespaced string keys and JSON *text*
values (``str``). It knows nothing of tenants, key grammar, JSON or cursors: those live
once, above it, in :mod:`fastapi_mcp_ctx.state`. Keys handed to a backend are ASCII
(``[A-Za-z0-9_.\\-/%~]``), so lexicographic order is the same in Python, Redis
(``ZRANGEBYLEX``) and SQL (``COLLATE "C"`` / SQLite ``BINARY``).

Lifecycle: constructing a backend does no I/O; it connects on first use and keeps its pool
until :meth:`StateBackend.aclose`; the next call after that reconnects, as the first did.
A pool belongs to the event loop it was made on: a backend used from another running loop
(``asyncio.run`` twice, one loop per test) makes a pool for that loop. Every failure to
reach the store is raised as :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` (never
a silent miss, never a partial batch), within a bounded time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "StateBackend", "prefix_upper_bound"]

Clock = Callable[[], float]
"""A wall clock in seconds since the epoch (``time.time`` by default); injectable for tests."""


@runtime_checkable
class StateBackend(Protocol):
    """Async key-value storage with TTLs, batches, an atomic take and an ordered prefix scan.

    Keys are namespaced ``str``; values are JSON text (``str``). ``ttl`` is in seconds
    (``float > 0``) or ``None`` for no expiry. A key past its expiry is invisible to every
    read (``get``, ``get_many``, ``take``, ``scan``, and the existence reported by
    ``delete``/``delete_many``).

    Raises:
        StateUnavailableError: from every method when the store cannot be reached.
    """

    async def get(self, key: str) -> str | None:
        """The value of ``key``, or ``None`` when absent or expired."""
        ...

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """``{key: value}`` for the keys present (absent and expired keys are left out)."""
        ...

    async def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, replacing any value and TTL; expire after ``ttl`` s."""
        ...

    async def set_many(self, items: Mapping[str, str], ttl: float | None = None) -> None:
        """Store every item with the same TTL, all or nothing (one transaction)."""
        ...

    async def delete(self, key: str) -> bool:
        """Remove ``key``; True when a live (unexpired) value was removed."""
        ...

    async def delete_many(self, keys: Sequence[str]) -> int:
        """Remove the keys; the number of live values removed (duplicates count once)."""
        ...

    async def take(self, key: str) -> str | None:
        """Atomically read and remove ``key``: of N concurrent takers exactly one gets the value."""
        ...

    async def scan(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` live ``(key, value)`` pairs with ``key.startswith(prefix)``.

        Sorted by key (byte order); only keys strictly greater than ``after`` when it is
        given. Paging with ``after`` = the last key returned never skips nor repeats a key
        that exists during the whole walk.
        """
        ...

    async def aclose(self) -> None:
        """Release connections and background tasks; idempotent. Keeps the data.

        The backend stays usable: the next call reconnects lazily, as the first call did.
        """
        ...

    async def check(self) -> None:
        """Reach the store now and verify it is usable (a start-up check; ``mcp_router.check()``).

        Raises:
            StateUnavailableError: the store cannot be reached (retryable).
            ConfigurationError: the store is reachable but unusable as configured (SQL: schema
                missing or outdated; the message names ``fastapi-mcp-ctx migrate``).
        """
        ...


def prefix_upper_bound(prefix: str) -> str:
    """The smallest string greater than every string starting with a non-empty ``prefix``.

    ``"t/a/"`` → ``"t/a0"``; so ``prefix <= k < prefix_upper_bound(prefix)`` ⇔
    ``k.startswith(prefix)`` in code-point (and, for ASCII, byte) order.
    """
    if not prefix:
        raise ValueError("prefix must not be empty")
    stripped = prefix.rstrip("\U0010ffff")
    if not stripped:
        raise ValueError("prefix has no upper bound")
    return stripped[:-1] + chr(ord(stripped[-1]) + 1)
