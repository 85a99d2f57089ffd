"""The redis-py side of the Redis stores: one loop's client, its command slots, scripts by
EVALSHA, and which failures are a misconfiguration rather than an outage.

Shared by the state backend (``backends.redis``) and the replica stores
(``fastapi_mcp_ctx._replicas.link``): :func:`client_from_url` builds a pooled
``decode_responses=True`` client (no I/O), :class:`Slots` caps in-flight commands,
:class:`LoopClient` runs commands and :class:`Script` objects on one event loop, and
:func:`refusal` tells a refusal a retry cannot fix from a retryable outage.

Every Redis failure is one of :data:`FAILURES` (redis-py's ``RedisError``, its cluster client's
``RedisClusterException`` family, which is not a ``RedisError``, and socket errors): the stores
catch that tuple and nothing narrower. Before a failure is translated, :func:`diagnose` looks at
the deployment when the failure may be a misconfiguration rather than an outage: a cluster none
of whose nodes ever answered, a sentinel group that does not monitor the master the URL names,
a "sentinel" that is a data node.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.sentinel import MasterNotFoundError
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    ClusterCrossSlotError,
    ClusterDownError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..errors import StateUnavailableError
from ._redis_url import PLAIN_URL_ON_CLUSTER, RedisTarget, check_deployment, parse_redis_url, retryable

__all__ = [
    "FAILURES",
    "RETRY_PAUSE",
    "LoopClient",
    "Misconfigured",
    "Script",
    "Slots",
    "client_from_url",
    "diagnose",
    "ping_masters",
    "refusal",
    "server_text",
]

FAILURES: tuple[type[BaseException], ...] = (RedisError, RedisClusterException, OSError)
"""Every exception a redis-py call raises for a Redis failure (``TimeoutError`` is an ``OSError``)."""

logger = logging.getLogger("fastapi_mcp_ctx")

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

    __slots__ = ("answered", "exec", "owned", "redis", "slots", "target")

    def __init__(self, redis: Redis, owned: bool, slots: Slots, target: RedisTarget | None = None) -> None:
        self.redis = redis
        self.owned = owned
        self.exec = cast("Callable[..., Awaitable[Any]]", getattr(redis, "execute_command"))
        self.slots = slots
        self.target = target  # the deployment, for :func:`diagnose` (None: a client of the caller's)
        self.answered = False

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
                elif not self.answered and self.target is not None and self.target.kind == "single":
                    await self._refuse_a_cluster_node()
                result = await work(self)
            except FAILURES as exc:
                if not (idempotent and retryable(exc)):
                    raise translate(await diagnose(self.target, exc)) from exc
            else:
                if not self.answered:
                    self._answered()
                return result
            await asyncio.sleep(RETRY_PAUSE)
            try:
                result = await work(self)
            except FAILURES as exc:
                raise translate(await diagnose(self.target, exc)) from exc
            if not self.answered:
                self._answered()
            return result

    async def _refuse_a_cluster_node(self) -> None:
        """Before the first command that succeeds on this client: a ``redis://`` URL naming a node
        of a Redis Cluster raises :class:`Misconfigured` (one ``INFO cluster``; a server that
        refuses ``INFO`` is let through: the command itself says what is wrong). A connection
        failure here is the command's own (as :meth:`attempt` retries or translates it)."""
        assert self.target is not None
        try:
            problem = await check_deployment(self.target, self.exec)
        except ResponseError:  # no INFO for this user (ACL), or renamed away
            return
        if problem is not None:  # the link names its own setting (MCP_SESSION_STORE_URL) instead
            raise Misconfigured(f"MCP_STORAGE_URL: {problem}")

    def _answered(self) -> None:
        self.answered = True
        if self.target is not None:
            _ANSWERED.add(self.target.url)

    async def aclose(self) -> None:
        if self.owned:
            try:
                await self.redis.aclose()
            except FAILURES:  # pragma: no cover - closing a dead pool
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
        except FAILURES as exc:
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
    if isinstance(exc, Misconfigured):
        return exc.problem
    if isinstance(exc, (AskError, ClusterCrossSlotError)):  # MOVED / ASK / CROSSSLOT: a cluster node behind redis://
        # (a cluster client follows MOVED and ASK itself; every script's keys share one slot)
        return PLAIN_URL_ON_CLUSTER
    if isinstance(exc, (AuthenticationError, AuthorizationError)):
        return "Redis refused the credentials: check the user and password in MCP_STORAGE_URL"
    if isinstance(exc, NoPermissionError):
        return "the Redis user lacks a permission (ACL): allow GET, MGET, EVALSHA, EVAL and PING on the namespace's keys"
    if not isinstance(exc, ResponseError) or isinstance(exc, (OutOfMemoryError, ReadOnlyError, ClusterDownError, TryAgainError)):
        return None  # redis-py strips the OOM / READONLY / CLUSTERDOWN / MASTERDOWN / TRYAGAIN prefix: they pass, as the others above
    text = str(exc)
    if text.split(" ", 1)[0].upper() in _TRANSIENT_REPLIES:
        return None
    if text.split(" ", 1)[0].upper() in ("MOVED", "ASK"):
        return PLAIN_URL_ON_CLUSTER
    if "DB index is out of range" in text:
        return "the database number in MCP_STORAGE_URL (redis://host:port/N) is beyond the server's `databases` setting"
    return "Redis answers an error to every command: check MCP_STORAGE_URL, the server's version (Lua scripting, GETDEL) and its configuration"


class Misconfigured(RedisError):
    """A Redis failure that :func:`diagnose` found to be a misconfiguration; ``problem`` says
    what to do (a :class:`~fastapi_mcp_ctx.errors.ConfigurationError` by :func:`refusal`)."""

    def __init__(self, problem: str) -> None:
        Exception.__init__(self, problem)
        self.problem = problem


_ANSWERED: set[str] = set()
"""The URLs of the deployments that answered a command in this process (any loop, any store)."""


async def diagnose(target: RedisTarget | None, exc: BaseException) -> BaseException:
    """``exc``, or a :class:`Misconfigured` when a look at ``target`` shows that no retry can
    help: a Redis Cluster none of whose startup nodes ever answered in this process (the URL's
    host:port list is wrong: after one answer, the same failure is an outage), a sentinel group
    that answers but monitors no master of the URL's name, or a "sentinel" that is a data node.
    Costs I/O only on the sentinel failures (one ``SENTINEL`` command per sentinel)."""
    if target is None or isinstance(exc, Misconfigured):
        return exc
    if target.kind == "cluster":
        unreached = isinstance(exc, (RedisClusterException, RedisConnectionError, RedisTimeoutError, OSError))
        if target.url in _ANSWERED or not unreached or isinstance(exc, (AuthenticationError, AuthorizationError)):
            return exc
        nodes = ", ".join(f"{h}:{p}" for h, p in target.nodes)
        logger.error("no node of the redis+cluster:// URL answered (%s): %s", nodes, server_text(exc))
        return Misconfigured(
            f"no node of the redis+cluster:// URL answers ({len(target.nodes)} asked, never answered since start-up): check its "
            "host:port list (any node of the cluster is enough) and that the cluster runs"
        )
    if target.kind == "sentinel" and (isinstance(exc, MasterNotFoundError) or _not_a_sentinel(exc)):
        if _every_sentinel_unreached(str(exc), len(target.nodes)):  # an outage: nothing to ask
            return exc
        problem = await _sentinel_problem(target)
        return exc if problem is None else Misconfigured(problem)
    return exc


def _every_sentinel_unreached(text: str, sentinels: int) -> bool:
    """Whether redis-py's ``MasterNotFoundError`` text lists every sentinel as unreachable: it
    names each sentinel it tried (``host=``); since redis-py 8.2 it lists those that *answered*
    with an error reply too (``ResponseError``: a data node's ``unknown command 'SENTINEL'``),
    and a sentinel that answered is reachable, so the group is asked what is wrong."""
    answered = "ResponseError" in text or "unknown command" in text.lower()
    return not answered and text.count("host=") >= sentinels


def _not_a_sentinel(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, ResponseError) and "unknown command" in text and "sentinel" in text


async def _sentinel_problem(target: RedisTarget) -> str | None:
    """Ask each sentinel of ``target`` for the master's address: a misconfiguration when one is
    a data node (``unknown command 'SENTINEL'``) or when those that answer all know no master
    of that name; None when the master is known (a failover) or no sentinel answers (an outage)."""
    from redis.asyncio import Redis as _Redis

    unknown: list[str] = []
    for host, port in target.nodes:
        name = f"{host}:{port}"
        client: Any = _Redis(host=host, port=port, password=target.sentinel_password, ssl=target.ssl, socket_timeout=1.0, decode_responses=True)
        try:
            address: Any = await client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", target.service)
        except ResponseError as exc:
            if _not_a_sentinel(exc):
                logger.error("redis+sentinel:// names %s, which is not a sentinel (%s)", name, server_text(exc))
                return (
                    "a host:port of the redis+sentinel:// URL is a Redis data node, not a sentinel (it answers "
                    "\"unknown command 'SENTINEL'\"): list the sentinels (port 26379 by default)"
                )
            continue
        except FAILURES:
            continue
        finally:
            await client.aclose()
        if address:
            return None
        unknown.append(name)
    if not unknown:
        return None
    logger.error("no sentinel monitors master %r (asked %s)", target.service, ", ".join(unknown))
    return (
        f"no sentinel monitors master {target.service!r} ({len(unknown)} sentinels of the URL answered"
        "): check the name in the URL path (redis+sentinel://host:port[,…]/name/db)"
    )


def client_from_url(url: str, timeout: float, max_connections: int) -> Redis:
    """The client of ``url`` (one server, a cluster or a sentinel group: :mod:`._redis_url`),
    without retries of its own (the caller retries what is idempotent). Raises ``ValueError``."""
    return cast("Redis", parse_redis_url(url).client(timeout=timeout, max_connections=max_connections))
