"""Redis backend (redis-py asyncio): native TTLs, Lua for every compound write.

Layout under ``namespace`` (default ``"mcp:"``)::

    <ns>v:<key>   STRING  the JSON text, with a native expiry (PX) when a TTL was given
    <ns>idx       ZSET    every key, score 0, for ordered prefix scans (ZRANGEBYLEX)

A write touching a value and the index is one Lua script, so it is atomic and costs one
round trip: ``set`` = SET PX + ZADD, ``set_many`` = all of them at once, ``take`` =
GETDEL + ZREM, ``delete``/``delete_many`` = DEL + ZREM. ``get``/``get_many`` are plain
GET/MGET. The index may hold keys whose value has expired; ``scan`` skips them and removes
them from the index inside its own script (lazy purge), so a keyset page never skips nor
repeats a live key.

On a Redis Cluster (``redis+cluster://…``) every key belongs to a *group*, its tenant:
``t/<tenant>/`` (``ctx.state``), ``x/<space>/<tenant>/`` (consent and other framework
records), else the key up to its second ``/``. A group has its own index and its values share
its hash tag, so each script above stays on one slot::

    <ns>v:{<group>}:<key>   STRING  the JSON text
    <ns>idx:{<group>}       ZSET    the group's keys

A tenant's ``list`` is one script on its slot (no cross-slot index); a scan wider than one
group (``clear_state`` of every tenant) finds the groups by ``SCAN`` of every master and
merges their pages; ``set_many`` / ``delete_many`` over several groups are atomic per group.
A shard that is down fails the tenants it holds (503) and only those.

Durability is the server's: run Redis with ``appendonly yes`` (``scripts/services.sh`` uses
``appendfsync always``) when acknowledged writes must survive a restart.

``take`` is at most once: if the connection dies after Redis ran GETDEL but before the reply
arrived, the value is gone and the caller gets :class:`StateUnavailableError`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from redis.asyncio import Redis

from ..errors import ConfigurationError, StateUnavailableError
from . import _redis_scripts as scripts
from ._loops import OneLoop, PerLoop
from ._redis_client import LoopClient, Script, Slots, client_from_url, ping_masters, refusal, server_text
from ._redis_url import check_deployment, parse_redis_url
from .base import prefix_upper_bound

__all__ = ["RedisBackend"]


def _glob_escape(text: str) -> str:
    return "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in text)

logger = logging.getLogger(__name__)

_refusal = refusal


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
            client_factory = functools.partial(client_from_url, url, timeout, max_connections)
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
        self._loops: PerLoop[LoopClient] = PerLoop(self._open, LoopClient.aclose)
        self._vp = f"{namespace}v:"
        self._idx = f"{namespace}idx"
        self._target = None if url is None else parse_redis_url(url)
        self._sharded = self._target is not None and self._target.sharded
        self._set = Script(scripts.SET)
        self._set_many = Script(scripts.SET_MANY)
        self._take = Script(scripts.TAKE)
        self._delete_many = Script(scripts.DELETE_MANY)
        self._scan = Script(scripts.SCAN)

    def _open(self) -> LoopClient:
        """The client of a loop that has none yet (no I/O)."""
        slots = Slots(self._max_connections, self._pool_timeout)
        if self._factory is not None:
            spare, self._spare = self._spare, None
            return LoopClient(spare or self._factory(), True, slots, self._target)
        assert self._client is not None
        self._one_loop.claim()
        return LoopClient(self._client, self._owns, slots)

    @property
    def client(self) -> Redis:
        """The redis-py client serving the running event loop (made now if this loop has none).

        Raises:
            RuntimeError: no running loop, or a ``client=`` used from a second loop.
        """
        return self._loops.get().redis

    @staticmethod
    def _unavailable(exc: BaseException) -> StateUnavailableError | ConfigurationError:
        """The error a failed command is raised as (see :func:`._redis_client.refusal`)."""
        problem = refusal(exc)
        if problem is not None:
            logger.error("redis state backend refused: %s (%s: %s)", problem, type(exc).__name__, server_text(exc))
            return ConfigurationError(f"ctx.state (redis) is unusable: {problem}; the server log has Redis's error.")
        logger.warning("redis state backend unavailable: %s: %s", type(exc).__name__, server_text(exc))
        return StateUnavailableError("State backend (redis) unavailable, retry later")

    @staticmethod
    def _ttl_ms(ttl: float | None) -> str:
        return "" if ttl is None else str(max(1, round(ttl * 1000)))

    async def _run(self, work: Callable[[LoopClient], Awaitable[Any]], *, idempotent: bool = True) -> Any:
        """``work`` on this loop's client; retried once when ``idempotent`` (see :meth:`LoopClient.attempt`)."""
        return await self._loops.get().attempt(work, self._unavailable, idempotent=idempotent)

    async def get(self, key: str) -> str | None:
        """See :meth:`StateBackend.get` (one GET)."""
        k = self._vkey(key)
        return cast("str | None", await self._run(lambda c: c.exec("GET", k)))

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """See :meth:`StateBackend.get_many` (one MGET; on a cluster one per key group)."""
        found: dict[str, str] = {}
        for group, members in self._by_group(keys).items():
            vp = self._vp_of(group)
            values = cast("list[str | None]", await self._run(lambda c, m=members, vp=vp: c.exec("MGET", *[vp + k for k in m])))
            found.update((k, v) for k, v in zip(members, values) if v is not None)
        return {k: found[k] for k in keys if k in found}

    async def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set` (one script: SET [PX] + ZADD)."""
        g = self._group(key)
        keys, args = [self._vp_of(g) + key, self._idx_of(g)], [value, self._ttl_ms(ttl), key]
        await self._run(lambda c: c.eval(self._set, keys, args))

    async def set_many(self, items: Mapping[str, str], ttl: float | None = None) -> None:
        """See :meth:`StateBackend.set_many` (one script: atomic; on a cluster, atomic per key group)."""
        ttl_ms = self._ttl_ms(ttl)
        for group, members in self._by_group(list(items)).items():
            vp = self._vp_of(group)
            keys = [self._idx_of(group), *[vp + k for k in members]]
            args: list[str] = [ttl_ms]
            for k in members:
                args += [k, items[k]]
            await self._run(lambda c, keys=keys, args=args: c.eval(self._set_many, keys, args))

    async def delete(self, key: str) -> bool:
        """See :meth:`StateBackend.delete`."""
        return await self.delete_many([key]) == 1

    async def delete_many(self, keys: Sequence[str]) -> int:
        """See :meth:`StateBackend.delete_many` (one script: DEL + ZREM each; on a cluster one per key group)."""
        n = 0
        for group, members in self._by_group(list(dict.fromkeys(keys))).items():
            vp = self._vp_of(group)
            script_keys = [self._idx_of(group), *[vp + k for k in members]]
            n += int(await self._run(lambda c, sk=script_keys, m=members: c.eval(self._delete_many, sk, m)))
        return n

    async def take(self, key: str) -> str | None:
        """See :meth:`StateBackend.take` (one script: GETDEL + ZREM). Never retried: at most once."""
        g = self._group(key)
        keys = [self._vp_of(g) + key, self._idx_of(g)]
        return cast("str | None", await self._run(lambda c: c.eval(self._take, keys, [key]), idempotent=False))

    async def scan(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, str]]:
        """See :meth:`StateBackend.scan` (one script: ZRANGEBYLEX + GET, purging dead index
        entries). On a cluster a prefix within one key group (a tenant's) is one script on its
        slot; a wider one (every tenant's) merges the pages of every group it covers."""
        if limit <= 0:
            return []
        lo = f"({after}" if after is not None and after >= prefix else f"[{prefix}"
        hi = f"({prefix_upper_bound(prefix)}" if prefix else "+"
        groups = [self._group(prefix)] if self._complete(prefix) else await self._groups_under(prefix)
        rows: list[tuple[str, str]] = []
        for group in groups:
            args: list[str | int] = [self._vp_of(group), lo, hi, limit]
            flat = cast("list[str]", await self._run(lambda c, g=group, a=args: c.eval(self._scan, [self._idx_of(g)], a)))
            rows += [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
        return sorted(rows)[:limit] if len(groups) > 1 else rows

    async def check(self) -> None:
        """See :meth:`StateBackend.check` (one PING; on a cluster, every master).

        Raises:
            ConfigurationError: also when a ``redis://`` URL names a node of a Redis Cluster
                (use ``redis+cluster://``).
        """
        if self._sharded:
            answers = await self._run(lambda c: ping_masters(c.redis, 1.0))
            if answers and all(why is not None for why in answers.values()):
                raise StateUnavailableError("State backend (redis cluster) unavailable: no master answers, retry later")
            return  # some masters down: only the tenants on their slots fail (see /mcp/ready's shards)
        await self._run(lambda c: c.exec("PING"))
        if self._target is not None:
            target = self._target
            problem = await self._run(lambda c: check_deployment(target, c.exec))
            if problem is not None:
                logger.error("redis state backend misconfigured: %s", problem)
                raise ConfigurationError(f"MCP_STORAGE_URL: {problem}")

    # -- key groups: one Redis has one; a cluster one per tenant (see the module docstring)
    def _group(self, key: str) -> str:
        if not self._sharded:
            return ""
        depth = 3 if key.startswith("x/") else 2
        i = -1
        for _ in range(depth):
            i = key.find("/", i + 1)
            if i < 0:
                return key
        return key[: i + 1]

    def _complete(self, prefix: str) -> bool:
        """Whether every key under ``prefix`` is in ``prefix``'s group."""
        return not self._sharded or prefix.count("/") >= (3 if prefix.startswith("x/") else 2)

    def _vp_of(self, group: str) -> str:
        return f"{self._vp}{{{group}}}:" if self._sharded else self._vp

    def _idx_of(self, group: str) -> str:
        return f"{self._idx}:{{{group}}}" if self._sharded else self._idx

    def _vkey(self, key: str) -> str:
        return self._vp_of(self._group(key)) + key

    def _by_group(self, keys: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for k in keys:
            out.setdefault(self._group(k), []).append(k)
        return out

    async def _groups_under(self, prefix: str) -> list[str]:
        """The key groups (their index keys, found by SCAN on every master) that may hold keys under ``prefix``."""
        head = f"{self._idx}:{{"

        async def find(c: LoopClient) -> list[str]:
            return [k async for k in cast("Any", c.redis).scan_iter(match=_glob_escape(head) + "*", count=1000)]

        names = cast("list[str]", await self._run(find))
        groups = {n[len(head) : -1] for n in names if n.endswith("}")}
        return sorted(g for g in groups if g.startswith(prefix) or prefix.startswith(g))

    async def aclose(self) -> None:
        """Close the pools this backend opened (a ``client=`` only with ``owns_client=True``).

        Idempotent. Data stays in Redis; the next call opens a new pool. Each other event
        loop's pool is closed by that loop (see :mod:`._loops`).
        """
        await self._loops.aclose()
