"""The session store, event store, bus and leases a router uses, chosen by
``MCP_SESSION_STORE_URL`` (``McpSettings.session_store_url``), and the readiness report.

==========================================  =================================================
``memory://`` (default)                     in this process: :class:`MemorySessionStore`,
                                            :class:`MemoryEventStore`, :class:`MemoryBus`
``redis://host:port/db``, ``rediss://…``,   shared by every replica: :mod:`.redis_sessions`,
``redis+cluster://…``,                      :mod:`.redis_events`, :mod:`.redis_bus`,
``redis+sentinel://…``                      :mod:`.redis_subscriptions`
==========================================  =================================================

No I/O happens here (the Redis pools connect on first use, one per event loop). A ``redis://``
URL without the ``redis`` extra installed is a
:class:`~fastapi_mcp_ctx.errors.ConfigurationError` naming ``pip install "fastapi-mcp-ctx[redis]"``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._extras import missing_extra
from .._transport.bus import MemoryBus, MessageBus
from .._transport.events import EventStore
from .._transport.leases import LocalLeases, StreamLeases
from .._transport.memory_events import MemoryEventStore
from .._transport.memory_sessions import MemorySessionStore
from .._transport.sessions import SessionStore
from .._transport.subscriptions import MemoryResourceSubscriptions, ResourceSubscriptions
from ..backends import REDIS_SCHEMES
from ..backends.memory import MemoryBackend
from ..errors import ConfigurationError, McpError
from ..settings import McpSettings

__all__ = ["ReplicaStores", "readiness", "replica_stores"]


@dataclass(slots=True)
class ReplicaStores:
    """What :func:`replica_stores` built; ``link`` is the Redis clients (None in memory)."""

    sessions: SessionStore
    events: EventStore
    bus: MessageBus
    leases: StreamLeases
    subscriptions: ResourceSubscriptions
    link: Any = None

    def leases_for(self, sessions: SessionStore) -> StreamLeases:
        """The leases to use with ``sessions`` (the in-process twin for a store given by the application)."""
        return self.leases if sessions is self.sessions else LocalLeases()

    async def aclose(self) -> None:
        """Close the Redis pools (data stays in Redis)."""
        if self.link is not None:
            await self.link.aclose()


def replica_stores(settings: McpSettings, *, pinned: Callable[[str], bool]) -> ReplicaStores:
    """Build the stores named by ``settings.session_store_url``.

    Args:
        pinned: memory only: ``pinned(session_id)`` True keeps a session from idling out (its
            GET stream is open here); with Redis the lease holder's renewal does that.
    Raises:
        ConfigurationError: an unsupported scheme, or the ``redis`` extra is missing.
    """
    url = settings.session_store_url
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    s = settings
    if scheme == "memory":
        return ReplicaStores(
            MemorySessionStore(
                idle_seconds=s.session_idle_seconds,
                max_sessions=s.max_sessions,
                max_per_owner=s.session_owner_quota,
                pinned=pinned,
            ),
            MemoryEventStore(max_events=s.event_retention_count, max_age_seconds=s.event_retention_seconds),
            MemoryBus(),
            LocalLeases(),
            MemoryResourceSubscriptions(),
        )
    if scheme not in REDIS_SCHEMES:
        raise ConfigurationError(
            f"MCP_SESSION_STORE_URL: unsupported scheme {scheme or '(none)'!r}; use memory:// (one process) "
            "or redis://host:port/db, redis+cluster://host:port[,host:port…] or "
            "redis+sentinel://host:port[,host:port…]/master-name/db (several replicas)"
        )
    try:
        from .link import RedisLink
        from .redis_bus import RedisBus
        from .redis_events import RedisEventStore
        from .redis_sessions import RedisLeases, RedisSessionStore
        from .redis_subscriptions import RedisResourceSubscriptions
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "the session store URL redis://") from exc
    try:
        link = RedisLink(url, namespace=s.session_store_namespace)
    except ValueError as exc:
        raise ConfigurationError(f"MCP_SESSION_STORE_URL is not a valid Redis URL: {exc}") from exc
    sessions = RedisSessionStore(
        link, idle_seconds=s.session_idle_seconds, max_sessions=s.max_sessions, max_per_owner=s.session_owner_quota
    )
    return ReplicaStores(
        sessions,
        RedisEventStore(
            link,
            max_events=s.event_retention_count,
            max_age_seconds=s.event_retention_seconds,
            live_seconds=s.session_idle_seconds + s.event_retention_seconds,
        ),
        RedisBus(link),
        RedisLeases(sessions, lease_seconds=s.session_lease_seconds),
        RedisResourceSubscriptions(link, ttl_seconds=2 * s.session_idle_seconds),
        link,
    )


async def _check(component: Any, method: str, timeout: float, *, ok: str = "ok", down: str = "") -> str:
    """``ok`` when ``await component.<method>()`` answers within ``timeout`` seconds (an answer
    of ``False`` is ``down``), ``"in-process"`` when the component has no such method (a memory
    twin), else why not."""
    call = getattr(component, method, None)
    if call is None:
        return "in-process"
    try:
        async with asyncio.timeout(timeout):
            answer = await call()
    except TimeoutError:
        return f"unavailable: no answer within {timeout:g} s"
    except McpError as exc:
        return f"unavailable: {exc.message or type(exc).__name__}"
    return f"unavailable: {down}" if answer is False else ok


async def readiness(*, sessions: Any, events: Any, bus: Any, state: Any, timeout: float = 2.0) -> dict[str, Any]:
    """Whether the stores this replica depends on answer now; the four checks run at once, so
    the answer comes within ``timeout`` seconds whatever hangs.

    Returns:
        ``{"ready": bool, "checks": {"sessions"|"events"|"bus"|"state": "ok" | "in-process" |
        "unavailable: <why>"}}``; ``ready`` is False when any check is unavailable. On a Redis
        Cluster also ``"shards": {"host:port": "ok, slots a-b" | "unavailable: <why>, slots a-b"}``,
        and ``checks.sessions`` is ``"degraded: …"`` (still ready) while some masters are down.
    """
    names = ("sessions", "events", "bus", "state")
    results = await asyncio.gather(
        _check(sessions, "ping", timeout),
        _check(events, "ping", timeout),
        _check(bus, "connected", timeout, down="the subscriber connection is down"),
        _check(state, "check", timeout, ok="in-process" if isinstance(state, MemoryBackend) else "ok"),
    )
    checks = dict(zip(names, results, strict=True))
    report: dict[str, Any] = {"ready": not any(v.startswith("unavailable") for v in checks.values()), "checks": checks}
    link = getattr(sessions, "link", None)
    if link is not None and getattr(link, "target", None) is not None and link.target.sharded:
        # a cluster: which masters answer; one down degrades (its slots' sessions and tenants
        # get 503) but keeps the replica ready, so the balancer keeps sending the others' traffic
        try:
            async with asyncio.timeout(timeout + 1.0):
                shards = await link.shards()
        except (TimeoutError, McpError) as exc:
            shards = {"cluster": f"unavailable: {exc}"}
        report["shards"] = shards
        down = sorted(name for name, v in shards.items() if v.startswith("unavailable"))
        if down and checks["sessions"] == "ok":
            checks["sessions"] = f"degraded: {len(down)} of {len(shards)} masters unavailable ({', '.join(down)})"
    return report
