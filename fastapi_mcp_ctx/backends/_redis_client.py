"""The redis-py side of the Redis stores: one loop's client, its command slots, scripts by
EVALSHA, and which failures are a misconfiguration rather than an outage.

Shared by the state backend (``backends.redis``) and the replica stores
(``fastapi_mcp_ctx._replicas.link``): :func:`client_from_url` builds a pooled
``decode_responses=True`` client (no I/O), :class:`Slots` caps in-flight commands,
:class:`LoopClient` runs commands and :class:`Script` objects on one event loop, and
:func:`refusal` tells a refusal a retry cannot fix from a retryable outage.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)

from ..errors import StateUnavailableError
from ._redis_url import PLAIN_URL_ON_CLUSTER, parse_redis_url, retryable

__all__ = ["RETRY_PAUSE", "LoopClient", "Script", "Slots", "client_from_url", "ping_masters", "refusal", "server_text"]

RETRY_PAUSE = 0.05
"""Seconds between the failed attempt of an idempotent command and its one retry."""


class Script:
    """A Lua script called by EVALSHA, falling back to EVAL (which caches it) after a restart."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


class Slots:
    """Caps in-flight commands at the pool size; a caller waits at most ``timeout`` s for a slot.

    Cheaper than redis-py's ``BlockingConnectionPool`` on the uncontended path (one
    semaphore acquire), and never lets the pool raise ``MaxConnectionsError`` under a burst.
    """

    __slots__ = ("_sem", "_timeout")

    def __init__(self, size: int, timeout: float) -> None:
        self._sem = asyncio.Semaphore(size)
        self._timeout = timeout

    async def __aenter__(self) -> None:
        sem = self._sem
        if not sem.locked():
            await sem.acquire()
            return
        try:
            async with asyncio.timeout(self._timeout):
                await sem.acquire()
        except TimeoutError as exc:
            raise StateUnavailableError("State backend (redis) busy: no free connection, retry later") from exc

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._sem.release()


class LoopClient:
    """The redis-py client of one event loop, with that loop's command slots."""

    __slots__ = ("exec", "owned", "redis", "slots")

    def __init__(self, redis: Redis, owned: bool, slots: Slots) -> None:
        self.redis = redis
        self.owned = owned
        self.exec = cast("Callable[..., Awaitable[Any]]", getattr(redis, "execute_command"))
        self.slots = slots

    async def eval(self, script: Script, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        try:
            return await self.exec("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:  # script cache empty (restart, SCRIPT FLUSH): EVAL loads it
            return await self.exec("EVAL", script.source, len(keys), *keys, *args)

    async def attempt(
        self, work: Callable[[LoopClient], Awaitable[Any]], translate: Callable[[BaseException], Exception], *, idempotent: bool
    ) -> Any:
        """``await work(self)`` in a command slot, once more (after :data:`RETRY_PAUSE`) after a
        broken connection or a failover reply when ``idempotent``; never otherwise (a command
        whose reply was lost may have run, and must not run twice). A Redis failure is raised
        as ``translate(exc)``."""
        async with self.slots:
            try:
                if getattr(self.redis, "_initialize", False) is True:  # a cluster client's first use
                    await _initialize(self.redis)
                return await work(self)
            except (RedisError, OSError) as exc:
                if not (idempotent and retryable(exc)):
                    raise translate(exc) from exc
            await asyncio.sleep(RETRY_PAUSE)
            try:
                return await work(self)
            except (RedisError, OSError) as exc:
                raise translate(exc) from exc

    async def aclose(self) -> None:
        if self.owned:
            try:
                await self.redis.aclose()
            except (RedisError, OSError):  # pragma: no cover - closing a dead pool
                pass


_INIT_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


async def _initialize(cluster: Any) -> None:
    """Load a cluster client's slot map, one client of the loop at a time: redis-py 8.1's
    clients that load theirs at once on one loop break each other's connections (``'NoneType'
    object has no attribute 'writelines'``)."""
    loop = asyncio.get_running_loop()
    lock = _INIT_LOCKS.setdefault(loop, asyncio.Lock())
    async with lock:
        if cluster._initialize:
            await cluster.initialize()


async def ping_masters(cluster: Any, timeout: float) -> dict[str, str | None]:
    """On a cluster client (slot map loaded): each master's ``host:port`` → None when it
    answered a PING within ``timeout`` s, else why not. The slot map is the client's own (a
    command that fails on a dead master reloads it: a failover promotes its replica)."""
    report: dict[str, str | None] = {}

    async def one(node: Any) -> None:
        try:
            async with asyncio.timeout(timeout):
                await cluster.execute_command("PING", target_nodes=node)
            report[str(node.name)] = None
        except (RedisError, OSError, TimeoutError) as exc:
            report[str(node.name)] = server_text(exc) if str(exc) else f"no answer within {timeout:g} s"

    await asyncio.gather(*(one(n) for n in cluster.get_primaries()))
    return dict(sorted(report.items()))


# Error replies a retry can outlive: loading a dataset, a busy script, a failover in progress,
# memory full until keys expire. Any other error reply repeats until the operator acts.
_TRANSIENT_REPLIES = ("LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "OOM", "NOREPLICAS")


def server_text(exc: BaseException) -> str:
    """The server's (or the socket's) error text, one line, bounded; URLs carry no password here."""
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def refusal(exc: BaseException) -> str | None:
    """What the operator must check when Redis refuses for good, or None for an outage.

    Connection-level failures (refused, reset, timed out, no free connection) and the transient
    error replies above are retryable; a wrong password, a missing ACL permission, a database
    index the server does not have, or any other error reply is a misconfiguration.
    """
    if isinstance(exc, (AuthenticationError, AuthorizationError)):
        return "Redis refused the credentials: check the user and password in MCP_STORAGE_URL"
    if isinstance(exc, NoPermissionError):
        return "the Redis user lacks a permission (ACL): allow GET, MGET, EVALSHA, EVAL and PING on the namespace's keys"
    if not isinstance(exc, ResponseError) or isinstance(exc, (OutOfMemoryError, ReadOnlyError)):
        return None  # redis-py strips the OOM / READONLY prefix of these replies: they pass, as the others above
    text = str(exc)
    if text.split(" ", 1)[0].upper() in _TRANSIENT_REPLIES:
        return None
    if text.split(" ", 1)[0].upper() in ("MOVED", "ASK"):
        return PLAIN_URL_ON_CLUSTER
    if "DB index is out of range" in text:
        return "the database number in MCP_STORAGE_URL (redis://host:port/N) is beyond the server's `databases` setting"
    return "Redis answers an error to every command: check MCP_STORAGE_URL, the server's version (Lua scripting, GETDEL) and its configuration"


def client_from_url(url: str, timeout: float, max_connections: int) -> Redis:
    """The client of ``url`` (one server, a cluster or a sentinel group: :mod:`._redis_url`),
    without retries of its own (the caller retries what is idempotent). Raises ``ValueError``."""
    return cast("Redis", parse_redis_url(url).client(timeout=timeout, max_connections=max_connections))
