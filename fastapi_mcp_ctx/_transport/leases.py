"""The GET-stream lease interface (one GET stream per 2025 session, on every replica) and its
in-process twin.

With one process the rule is kept by the process itself (``ResumableStreams``: a second GET
gets 409), so :class:`LocalLeases` grants everything. With several replicas
:class:`~fastapi_mcp_ctx._replicas.redis_sessions.RedisLeases` holds a lease in Redis that its holder renews while its
connection is open; it expires soon after the holder dies.
"""

from __future__ import annotations

import logging
import secrets
from typing import Protocol

import anyio

from ..errors import McpError

__all__ = ["LocalLeases", "StreamLeases", "hold"]

logger = logging.getLogger("fastapi_mcp_ctx")


class StreamLeases(Protocol):
    """Who holds each session's GET stream, across replicas."""

    @property
    def shared(self) -> bool:
        """True when the leases span replicas (the holder renews them)."""
        ...

    @property
    def lease_seconds(self) -> float:
        """A lease lives this long without renewal."""
        ...

    def token(self) -> str:
        """A fresh holder token (one per connection)."""
        ...

    async def acquire(self, session_id: str, token: str, *, force: bool = False) -> bool:
        """Take the lease; False when another holder has it (``force``: take it regardless)."""
        ...

    async def renew(self, session_id: str, token: str) -> bool:
        """Extend the lease (and the session's idle expiry); False when it was lost."""
        ...

    async def release(self, session_id: str, token: str) -> None:
        """Give the lease up, when ``token`` holds it."""
        ...

    async def note_get_stream(self, session_id: str, stream_id: str) -> None:
        """Record ``stream_id`` as a GET stream of the session."""
        ...

    async def is_get_stream(self, session_id: str, stream_id: str) -> bool:
        """Whether ``stream_id`` was opened as a GET stream of the session on another replica."""
        ...


class LocalLeases:
    """One process: the process keeps the rule itself; every lease is granted."""

    shared = False
    lease_seconds = 0.0

    def token(self) -> str:
        return secrets.token_hex(8)

    async def acquire(self, session_id: str, token: str, *, force: bool = False) -> bool:
        return True

    async def renew(self, session_id: str, token: str) -> bool:
        return True

    async def release(self, session_id: str, token: str) -> None:
        return None

    async def note_get_stream(self, session_id: str, stream_id: str) -> None:
        return None

    async def is_get_stream(self, session_id: str, stream_id: str) -> bool:
        return False


async def hold(leases: StreamLeases, session_id: str, token: str) -> None:
    """Renew ``token``'s lease every third of its life until cancelled (the connection ended);
    a renewal also keeps the session from idling out on every replica. An unreachable store is
    retried at the next turn (the lease may lapse meanwhile: a reconnect elsewhere is then let in)."""
    while True:
        await anyio.sleep(leases.lease_seconds / 3)
        try:
            await leases.renew(session_id, token)
        except McpError as exc:
            logger.warning("could not renew a GET stream lease: %s", exc)
