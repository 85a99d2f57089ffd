"""Redis backend (redis-py asyncio): native TTLs, Lua for every compound write.

Layout under ``namespace`` (default ``"mcp:"``)::

    <ns>v:<key>   STRING  the JSON text, with a native expiry (PX) when a TTL was given
    <ns>idx       ZSET    every key, score 0, for ordered prefix scans (ZRANGEBYLEX)

A write touching a value and the index is one Lua script, so it is atomic and costs one
round trip: ``set`` = SET PX + ZADD, ``set_many`` = all of them at once, ``take`` =
GETDEL + ZREM, ``delete``/``delete_many`` = DEL + ZREM. ``get``/``get_many`` are plain
GET/MGET. The index may hold keys whose value has expired; ``scan`` skips them and removes
them from the index inside its own script (lazy purge), so a keyset page never skips nor
repeats a live key. Redis Cluster is not supported (the index spans every key).

Durability is the server's: run Redis with ``appendonly yes`` (``scripts/services.sh`` uses
``appendfsync always``) when acknowledged writes must survive a restart.

``take`` is at most once: if the connection dies after Redis ran GETDEL but before the reply
arrived, the value is gone and the caller gets :class:`StateUnavailableError`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, cast

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    NoPermissionError,
    NoScriptError,
    RedisError,
    ResponseError,
)

from ..errors import ConfigurationError, StateUnavailableError
from ._loops import OneLoop, PerLoop
from .base import prefix_upper_bound

__all__ = ["RedisBackend"]

logger = logging.getLogger(__name__)

_SET = """
if ARGV[2] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
redis.call('ZADD', KEYS[2], 0, ARGV[3])
return 1
"""

# KEYS = idx, value keys...; ARGV = ttl_ms ('' = none), then (key, value) pairs.
_SET_MANY = """
local n = #KEYS - 1
for i = 1, n do
  local v = ARGV[2 * i + 1]
  if ARGV[1] == '' then
    redis.call('SET', KEYS[i + 1], v)
  else
    redis.call('SET', KEYS[i + 1], v, 'PX', ARGV[1])
  end
  redis.call('ZADD', KEYS[1], 0, ARGV[2 * i])
end
return n
"""

_TAKE = """
local v = redis.call('GETDEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return v
"""

# KEYS = idx, value keys...; ARGV = keys...
_DELETE_MANY = """
local n = 0
for i = 2, #KEYS do
  n = n + redis.call('DEL', KEYS[i])
  redis.call('ZREM', KEYS[1], ARGV[i - 1])
end
return n
"""

# KEYS = idx; ARGV = value-key prefix, lo, hi, limit. Returns {k1, v1, k2, v2, ...}.
_SCAN = """
local idx, vp, lo, hi = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local limit = tonumber(ARGV[4])
local out, found = {}, 0
while found < limit do
  local batch = limit - found
  if batch < 32 then batch = 32 end
  local members = redis.call('ZRANGEBYLEX', idx, lo, hi, 'LIMIT', 0, batch)
  if #members == 0 then break end
  for _, m in ipairs(members) do
    local v = redis.call('GET', vp .. m)
    if v then
      if found < limit then
        out[#out + 1] = m
        out[#out + 1] = v
        found = found + 1
      end
    else
      redis.call('ZREM', idx, m)
    end
    lo = '(' .. m
    if found >= limit then break end
  end
  if #members < batch then break end
end
return out
"""


class _Script:
    """A Lua script called by EVALSHA, falling back to EVAL (which caches it) after a restart."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


class _Slots:
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


class _Client:
    """The redis-py client of one event loop, with that loop's command slots."""

    __slots__ = ("exec", "owned", "redis", "slots")

    def __init__(self, redis: Redis, owned: bool, slots: _Slots) -> None:
        self.redis = redis
        self.owned = owned
        self.exec = cast("Callable[..., Awaitable[Any]]", getattr(redis, "execute_command"))
        self.slots = slots

    async def eval(self, script: _Script, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        try:
            return await self.exec("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:  # script cache empty (restart, SCRIPT FLUSH): EVAL loads it
            return await self.exec("EVAL", script.source, len(keys), *keys, *args)

    async def aclose(self) -> None:
        if self.owned:
            try:
                await self.redis.aclose()
            except (RedisError, OSError):  # pragma: no cover - closing a dead pool
                pass


class RedisBackend:
    """A :class:`~fastapi_mcp_ctx.backends.base.StateBackend` on Redis ≥ 6.2 (GETDEL).

    Args:
        url: ``redis://[user:pass@]host:port/db`` or ``rediss://…``.
        client: an existing ``redis.asyncio.Redis`` created with ``decode_responses=True``;
            the backend then does not own it unless ``owns_client=True``. A redis-py asyncio
            client belongs to one event loop: the backend uses it on the loop it is first
            used on, and a call from another loop raises ``RuntimeError`` (use ``url`` or
            ``client_factory`` when several loops share the backend).
        client_factory: builds a ``decode_responses=True`` client (no I/O), called once per
            event loop that uses the backend (e.g. ``lambda:
            fakeredis.FakeAsyncRedis(server=server, decode_responses=True)``); the backend owns
            and closes what it builds.
        namespace: prefix of every Redis key this backend writes.
        timeout: socket connect / read timeout in seconds; bounds how long a call to a dead
            server takes before :class:`StateUnavailableError`.
        max_connections: pool size; more concurrent calls wait for a free connection.
        pool_timeout: longest wait for a free connection, in seconds (then
            :class:`StateUnavailableError`).

    Exactly one of ``url``, ``client`` and ``client_factory`` is given (else ``ValueError``).
    No I/O happens here: a pool connects on first use, one pool per event loop (built from
    ``url`` or ``client_factory``; see :mod:`._loops`). :meth:`aclose` closes the pools; the
    next call opens a new one.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Redis | None = None,
        client_factory: Callable[[], Redis] | None = None,
        owns_client: bool | None = None,
        namespace: str = "mcp:",
        timeout: float = 2.0,
        max_connections: int = 64,
        pool_timeout: float = 5.0,
    ) -> None:
        if sum(x is not None for x in (url, client, client_factory)) != 1:
            raise ValueError("RedisBackend needs exactly one of url, client or client_factory")
        self._spare: Redis | None = None
        if url is not None:
            client_factory = functools.partial(_client_from_url, url, timeout, max_connections)
            self._spare = client_factory()  # parses the URL now: a bad one fails here, not at first use
        self._factory = client_factory
        self._client = client
        self._owns = bool(owns_client)
        self._one_loop = OneLoop(
            "RedisBackend(client=...)",
            "a redis-py asyncio client cannot move between event loops",
            "Build the backend with RedisBackend(url) or RedisBackend(client_factory=...) to get a client per loop.",
        )
        self._max_connections = max_connections
        self._pool_timeout = pool_timeout
        self._loops: PerLoop[_Client] = PerLoop(self._open, _Client.aclose)
        self._vp = f"{namespace}v:"
        self._idx = f"{namespace}idx"
        self._set = _Script(_SET)
        self._set_many = _Script(_SET_MANY)
        self._take = _Script(_TAKE)
        self._delete_many = _Script(_DELETE_MANY)
        self._scan = _Script(_SCAN)

    def _open(self) -> _Client:
        """The client of a loop that has none yet (no I/O)."""
        slots = _Slots(self._max_connections, self._pool_timeout)
        if self._factory is not None:
            spare, self._spare = self._spare, None
            return _Client(spare or self._factory(), True, slots)
        assert self._client is not None
        self._one_loop.claim()
        return _Client(self._client, self._owns, slots)

    @property
    def client(self) -> Redis:
        """The redis-py client serving the running event loop (made now if this loop has none).

        Raises:
            RuntimeError: no running loop, or a ``client=`` used from a second loop.
        """
        return self._loops.get().redis

    @staticmethod
    def _unavailable(exc: BaseException) -> StateUnavailableError | ConfigurationError:
        """The error a failed command is raised as (see :func:`_refusal`)."""
        refusal = _refusal(exc)
        if refusal is not None:
            logger.error("redis state backend refused: %s (%s: %s)", refusal, type(exc).__name__, _server_text(exc))
            return ConfigurationError(f"ctx.state (redis) is unusable: {refusal}; the server log has Redis's error.")
        logger.warning("redis state backend unavailable: %s: %s", type(exc).__name__, _server_text(exc))
        return StateUnavailableError("State backend (redis) unavailable, retry later")

    @staticmethod
    def _ttl_ms(ttl: float | None) -> str:
        return "" if ttl is None else str(max(1, round(ttl * 1000)))

    async def get(self, key: str) -> str | None:
        """See :meth:`StateBackend.get` (one GET)."""
        c = self._loops.get()
        async with c.slots:
            try:
                return cast("str | None", await c.exec("GET", self._vp + key))
            except (RedisError, OSError) as exc:
                raise self._unavailable(exc) from exc

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """See :meth:`StateBackend.get_many` (one MGET)."""
        if not keys:
            return {}
        vp, c = self._vp, self._loops.get()
        async with c.slots:
            try:
                values = cast("list[str | None]", await c.exec("MGET", *[vp + k for k in keys]))
            except (RedisError, OSError) as exc:
                raise self._unavailable(exc) from exc
        return {k: v for k, v in zip(keys, values) if v is not None}

    async def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set` (one script: SET [PX] + ZADD)."""
        c = self._loops.get()
        async with c.slots:
            try:
                await c.eval(self._set, [self._vp + key, self._idx], [value, self._ttl_ms(ttl), key])
            except (RedisError, OSError) as exc:
                raise self._unavailable(exc) from exc

    async def set_many(self, items: Mapping[str, str], ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set_many` (one script: atomic)."""
        if not items:
            return
        vp = self._vp
        keys = [self._idx, *[vp + k for k in items]]
        args: list[str] = [self._ttl_ms(ttl)]
        for k, v in items.items():
            args.append(k)
            args.append(v)
        c = self._loops.get()
        async with c.slots:
            try:
                await c.eval(self._set_many, keys, args)
            except (RedisError, OSError) as exc:
                raise self._unavailable(exc) from exc

    async def delete(self, key: str) -> bool:
        """See :meth:`StateBackend.delete`."""
        return await self.delete_many([key]) == 1

    async def delete_many(self, keys: Sequence[str]) -> int:
        """See :meth:`StateBackend.delete_many` (one script: DEL + ZREM each)."""
        unique = list(dict.fromkeys(keys))
        if not unique:
            return 0
        vp, c = self._vp, self._loops.get()
        async with c.slots:
            try:
                n = await c.eval(self._delete_many, [self._idx, *[vp + k for k in unique]], unique)
            except (RedisError, OSError) as exc:
                raise self._unavailable(exc) from exc
        return int(n)

    async def take(self, key: str) -> str | None:
        """See :meth:`StateBackend.take` (one script: GETDEL + ZREM)."""
        c = self._loops.get()
        async with c.slots:
            try:
                return cast("str | None", await c.eval(self._take, [self._vp + key, self._idx], [key]))
            except (RedisError, OSError) as exc:
                raise self._unavailable(exc) from exc

    async def scan(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, str]]:
        """See :meth:`StateBackend.scan` (one script: ZRANGEBYLEX + GET, purging dead index entries)."""
        if limit <= 0:
            return []
        lo = f"({after}" if after is not None and after >= prefix else f"[{prefix}"
        hi = f"({prefix_upper_bound(prefix)}" if prefix else "+"
        c = self._loops.get()
        async with c.slots:
            try:
                flat = cast("list[str]", await c.eval(self._scan, [self._idx], [self._vp, lo, hi, limit]))
            except (RedisError, OSError) as exc:
                raise self._unavailable(exc) from exc
        return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    async def check(self) -> None:
        """See :meth:`StateBackend.check` (one PING)."""
        c = self._loops.get()
        async with c.slots:
            try:
                await c.exec("PING")
            except (RedisError, OSError) as exc:
                raise self._unavailable(exc) from exc

    async def aclose(self) -> None:
        """Close the pools this backend opened (a ``client=`` only with ``owns_client=True``).

        Idempotent. Data stays in Redis; the next call opens a new pool. Each other event
        loop's pool is closed by that loop (see :mod:`._loops`).
        """
        await self._loops.aclose()


# Error replies a retry can outlive: loading a dataset, a busy script, a failover in progress,
# memory full until keys expire. Any other error reply repeats until the operator acts.
_TRANSIENT_REPLIES = ("LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "OOM", "NOREPLICAS")


def _server_text(exc: BaseException) -> str:
    """The server's (or the socket's) error text, one line, bounded; URLs carry no password here."""
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def _refusal(exc: BaseException) -> str | None:
    """What the operator must check when Redis refuses for good, or None for an outage.

    Connection-level failures (refused, reset, timed out, no free connection) and the transient
    error replies above are retryable; a wrong password, a missing ACL permission, a database
    index the server does not have, or any other error reply is a misconfiguration.
    """
    if isinstance(exc, (AuthenticationError, AuthorizationError)):
        return "Redis refused the credentials: check the user and password in MCP_STORAGE_URL"
    if isinstance(exc, NoPermissionError):
        return "the Redis user lacks a permission (ACL): allow GET, MGET, EVALSHA, EVAL and PING on the namespace's keys"
    if not isinstance(exc, ResponseError):
        return None
    text = str(exc)
    if text.split(" ", 1)[0].upper() in _TRANSIENT_REPLIES:
        return None
    if "DB index is out of range" in text:
        return "the database number in MCP_STORAGE_URL (redis://host:port/N) is beyond the server's `databases` setting"
    return "Redis answers an error to every command: check MCP_STORAGE_URL, the server's version (Lua scripting, GETDEL) and its configuration"


def _client_from_url(url: str, timeout: float, max_connections: int) -> Redis:
    from_url = cast("Callable[..., ConnectionPool]", getattr(ConnectionPool, "from_url"))
    pool = from_url(
        url,
        max_connections=max_connections,
        decode_responses=True,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 1),
    )
    return Redis.from_pool(pool)
