"""Which Redis deployment a URL names, and its redis-py clients: the one place every Redis store
(``ctx.state``, the replica stores, any later one) turns a URL into a client.

==============================================================  ==========================================
``redis://[user:pass@]host:port/db``, ``rediss://…``            one server (redis-py ``Redis``)
``redis+cluster://[user:pass@]host:port[,host:port…]``          Redis Cluster (``RedisCluster``): the nodes
``rediss+cluster://…``                                          are startup nodes (one is enough; the others
                                                                are found with ``CLUSTER SLOTS``); db 0 only
``redis+sentinel://[user:pass@]host:port[,host:port…]/name/db`` Sentinel: the sentinels' addresses, the
``rediss+sentinel://…``                                         monitored master's ``name`` and the database
                                                                (redis-py ``Sentinel(...).master_for(name)``);
                                                                ``?sentinel_password=…`` when the sentinels
                                                                have a password of their own
==============================================================  ==========================================

``user:pass`` authenticate to the data nodes (the cluster's nodes, the sentinel group's master).

A cluster needs keys that one script touches to share a hash tag: :meth:`RedisTarget.tag` wraps
a key's group in ``{…}`` on a cluster (and is the identity elsewhere, so the single-server and
Sentinel key names are what they always were). No client built here retries on its own: a
failed command reaches the store, which retries once only what is idempotent
(:func:`retryable`), so nothing is applied twice.

Every pooled connection is checked before a command is written on it (:class:`FreshConnection`
and its siblings): one the server closed (a restart) is replaced for free, one idle longer than
:data:`HEALTH_CHECK_SECONDS` costs a ``PING`` first. A command is therefore never lost on a
connection that died while idle, retried or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, cast
from urllib.parse import parse_qs, unquote, urlsplit

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import Connection, SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    ClusterDownError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = [
    "CLUSTER_SCHEMES",
    "HEALTH_CHECK_SECONDS",
    "PLAIN_URL_ON_CLUSTER",     "SENTINEL_SCHEMES",
    "FreshConnection",
    "RedisTarget",
    "check_deployment",
    "parse_redis_url",
    "retryable",
]

Kind = Literal["single", "cluster", "sentinel"]

CLUSTER_SCHEMES: Final = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES: Final = ("redis+sentinel", "rediss+sentinel")
SINGLE_SCHEMES: Final = ("redis", "rediss")

HEALTH_CHECK_SECONDS: Final = 2.0
"""A pooled connection idle longer than this many seconds is PINGed before its next command
(redis-py's ``health_check_interval``): one round trip, only after such an idle time."""


async def _revive(conn: Any, health_check: Callable[[], Any]) -> None:
    """Before a command is written on ``conn``: replace it when the server closed it (its EOF is
    already read: a restart, an idle timeout), else run redis-py's health check (a PING when
    idle longer than the interval) and replace it when that PING finds it closed. Nothing of the
    command was sent on the dead connection, so a non-idempotent command is safe to send on the
    new one. A PING that times out raises (the server is there but does not answer)."""
    reader = conn._reader
    if reader is None or not reader.at_eof():
        try:
            await health_check()
            return
        except RedisConnectionError:
            pass
    await conn.disconnect()
    await conn.connect_check_health(check_health=False)


class FreshConnection(Connection):
    """A pooled connection checked before each command (see :func:`_revive`)."""

    async def check_health(self) -> None:
        await _revive(self, super().check_health)


class FreshSSLConnection(SSLConnection):
    """:class:`FreshConnection` over TLS."""

    async def check_health(self) -> None:
        await _revive(self, super().check_health)


class FreshSentinelConnection(SentinelManagedConnection):
    """:class:`FreshConnection` to a sentinel group's master."""

    async def check_health(self) -> None:
        await _revive(self, super().check_health)


class FreshSentinelSSLConnection(SentinelManagedSSLConnection):
    """:class:`FreshSentinelConnection` over TLS."""

    async def check_health(self) -> None:
        await _revive(self, super().check_health)


def _nodes(netloc: str, default_port: int) -> tuple[tuple[str, int], ...]:
    hosts = netloc.rsplit("@", 1)[-1]
    nodes: list[tuple[str, int]] = []
    for part in hosts.split(","):
        part = part.strip()
        if not part:
            raise ValueError("an empty host in the node list")
        if part.startswith("["):  # [ipv6]:port
            host, _, rest = part[1:].partition("]")
            port = rest.lstrip(":")
        else:
            host, _, port = part.rpartition(":") if ":" in part else (part, "", "")
        if not host:
            raise ValueError(f"no host in {part!r}")
        if port and not port.isdigit():
            raise ValueError(f"port {port!r} of {part!r} is not a number")
        nodes.append((host, int(port) if port else default_port))
    return tuple(nodes)


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """A parsed Redis URL (see the module docstring); build with :func:`parse_redis_url`."""

    url: str
    kind: Kind
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False
    sentinel_password: str | None = None

    @property
    def sharded(self) -> bool:
        """True on a Redis Cluster: keys one script touches must share a hash tag."""
        return self.kind == "cluster"

    def tag(self, group: str) -> str:
        """``{group}`` on a cluster (every key holding it maps to one slot), ``group`` elsewhere."""
        return f"{{{group}}}" if self.kind == "cluster" else group

    def client(self, *, timeout: float, max_connections: int) -> Any:
        """A ``decode_responses=True`` client (``Redis`` or ``RedisCluster``), no I/O yet.

        Args:
            timeout: socket connect / read timeout, seconds (None-free: a dead node answers
                within it).
            max_connections: pool size (per node on a cluster).
        """
        common: dict[str, Any] = {
            "decode_responses": True,
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "username": self.username,
            "password": self.password,
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": HEALTH_CHECK_SECONDS,
        }
        if self.kind == "cluster":
            from redis.asyncio.cluster import ClusterNode, RedisCluster

            cluster: Any = RedisCluster(
                startup_nodes=[ClusterNode(h, p) for h, p in self.nodes],
                max_connections=max_connections,
                ssl=self.ssl,
                require_full_coverage=False,  # a shard down: the others keep serving their slots
                **common,
            )
            fresh = FreshSSLConnection if self.ssl else FreshConnection  # RedisCluster takes no connection_class
            cluster.nodes_manager.connection_kwargs["connection_class"] = fresh  # the nodes it finds
            for node in cluster.nodes_manager.startup_nodes.values():
                node.connection_class = fresh
            return cluster
        if self.kind == "sentinel":
            return Redis(connection_pool=self.pool(timeout=timeout, max_connections=max_connections, socket_timeout=timeout))
        from_url = cast("Callable[..., ConnectionPool]", getattr(ConnectionPool, "from_url"))
        common.pop("username")
        common.pop("password")
        fresh = FreshSSLConnection if self.ssl else FreshConnection
        return Redis.from_pool(from_url(self.url, max_connections=max_connections, connection_class=fresh, **common))

    def pool(
        self, *, timeout: float, max_connections: int = 2**31, socket_timeout: float | None = None, node: tuple[str, int] | None = None
    ) -> ConnectionPool:
        """A connection pool of the single server, of the sentinel group's current master
        (no I/O; each new connection asks the sentinels where the master is), or of one node
        of a cluster (``node``: its host and port)."""
        kw: dict[str, Any] = {
            "decode_responses": True,
            "socket_connect_timeout": timeout,
            "socket_timeout": socket_timeout,
            "retry": Retry(NoBackoff(), 0),
            "max_connections": max_connections,
            "health_check_interval": HEALTH_CHECK_SECONDS,
        }
        if self.kind == "cluster":
            if node is None:
                raise ValueError("a Redis Cluster has no single connection pool: name one of its nodes")
            connection_class = FreshSSLConnection if self.ssl else FreshConnection
            return ConnectionPool(
                connection_class=connection_class, host=node[0], port=node[1], username=self.username, password=self.password, **kw
            )
        if self.kind == "single":
            from_url = cast("Callable[..., ConnectionPool]", getattr(ConnectionPool, "from_url"))
            return from_url(self.url, connection_class=FreshSSLConnection if self.ssl else FreshConnection, **kw)
        from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

        # no retry of its own either: redis-py's default (3, backoff up to 10 s) made 16 s of one outage answer
        sentinel_kwargs: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout, "retry": Retry(NoBackoff(), 0)}
        if self.sentinel_password is not None:
            sentinel_kwargs["password"] = self.sentinel_password
        sentinel = Sentinel(list(self.nodes), sentinel_kwargs=sentinel_kwargs)
        kw["connection_class"] = FreshSentinelSSLConnection if self.ssl else FreshSentinelConnection
        return SentinelConnectionPool(
            self.service, sentinel, db=self.db, username=self.username, password=self.password, check_connection=False, **kw
        )


def parse_redis_url(url: str) -> RedisTarget:
    """The deployment ``url`` names (no I/O).

    Raises:
        ValueError: an unknown scheme, no host, a bad port, a cluster URL with a database
            other than 0, a sentinel URL without a master name.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    if scheme in SINGLE_SCHEMES:
        from_url = cast("Callable[..., ConnectionPool]", getattr(ConnectionPool, "from_url"))
        from_url(url)  # redis-py's own checks (no I/O)
        path = parts.path.strip("/")
        return RedisTarget(url, "single", db=int(path) if path.isdigit() else 0, username=user, password=password, ssl=scheme == "rediss")
    if scheme not in CLUSTER_SCHEMES + SENTINEL_SCHEMES:
        raise ValueError(f"unsupported scheme {scheme or '(none)'!r}")
    if not parts.netloc.rsplit("@", 1)[-1]:
        raise ValueError(f"{scheme}:// needs at least one host:port")
    segments = [unquote(s) for s in parts.path.split("/") if s]
    query = parse_qs(parts.query)
    if scheme in CLUSTER_SCHEMES:
        if segments not in ([], ["0"]):
            raise ValueError("a Redis Cluster has database 0 only: redis+cluster://host:port[,host:port…]")
        return RedisTarget(url, "cluster", _nodes(parts.netloc, 6379), username=user, password=password, ssl=scheme.startswith("rediss"))
    if not segments or len(segments) > 2 or (len(segments) == 2 and not segments[1].isdigit()):
        raise ValueError("redis+sentinel:// needs the master's name and an optional database: redis+sentinel://host:port[,…]/name[/db]")
    sentinel_password = query.get("sentinel_password", [None])[0]
    return RedisTarget(
        url,
        "sentinel",
        _nodes(parts.netloc, 26379),
        service=segments[0],
        db=int(segments[1]) if len(segments) == 2 else 0,
        username=user,
        password=password,
        ssl=scheme.startswith("rediss"),
        sentinel_password=sentinel_password,
    )


PLAIN_URL_ON_CLUSTER: Final = (
    "the URL names one node of a Redis Cluster (INFO cluster: cluster_enabled:1) with redis://; keys on the other "
    "nodes' slots would fail (MOVED): use redis+cluster://host:port[,host:port…] (docs/deployment.md)"
)


async def check_deployment(target: RedisTarget, exec_: Callable[..., Any]) -> str | None:
    """What is wrong with using ``target`` as it is named, or None: a ``redis://`` URL of a
    cluster node (``exec_`` runs one command on the deployment)."""
    if target.kind != "single":
        return None
    info: Any = await exec_("INFO", "cluster")
    enabled = str(cast("dict[str, Any]", info).get("cluster_enabled")) == "1" if isinstance(info, dict) else "cluster_enabled:1" in str(info)
    return PLAIN_URL_ON_CLUSTER if enabled else None


def retryable(exc: BaseException) -> bool:
    """Whether one more attempt of an *idempotent* command may succeed: the connection broke or
    timed out, or the deployment is between masters (a failover: ``CLUSTERDOWN``, ``TRYAGAIN``,
    ``LOADING``, ``READONLY`` from a demoted master, a sentinel naming no master yet)."""
    # a sentinel naming no master yet is a ConnectionError (MasterNotFoundError); redis-py strips
    # the READONLY prefix of ReadOnlyError; refused credentials are ConnectionErrors too, for good
    if isinstance(exc, (AuthenticationError, AuthorizationError)):
        return False
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError, BusyLoadingError, ReadOnlyError, OSError)):
        return True
    if isinstance(exc, ResponseError):
        return str(exc).split(" ", 1)[0].upper() in ("READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "LOADING")
    return False
