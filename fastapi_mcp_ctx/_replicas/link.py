"""One Redis deployment shared by the replica stores (sessions, events, bus): its clients.

The same redis-py asyncio client family and per-loop pool handling as ``ctx.state``'s
:class:`~fastapi_mcp_ctx.backends.redis.RedisBackend` (:mod:`..backends._loops`): a pool is
made, without I/O, on the first call from each running event loop. Two pools per loop:

- *commands*: short commands and Lua scripts, at most ``max_connections`` in flight (a caller
  waits at most ``pool_timeout`` seconds for a slot);
- *blocking*: ``XREAD BLOCK`` of the SSE tails, one connection per waiting reader (unbounded:
  each open SSE connection holds one while it waits), with a socket timeout longer than the
  longest block (:data:`BLOCK_SECONDS`).

:meth:`RedisLink.batcher` makes the third kind: a :class:`~.autopipe.KeyBatcher`, one script
over the keys of concurrent callers in one round trip, on connections of its own (the session
lookups of concurrent requests).

Every failure is translated at this edge: an outage (refused, reset, timed out, a transient
error reply) is :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` (HTTP 503 +
``Retry-After``), a refusal that repeats until the operator acts (credentials, ACL, database
number) a :class:`~fastapi_mcp_ctx.errors.ConfigurationError`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from ..backends._loops import PerLoop
from ..backends._redis_client import LoopClient as _Client
from ..backends._redis_client import Script as _Script
from ..backends._redis_client import Slots as _Slots
from ..backends._redis_client import client_from_url as _client_from_url
from ..backends._redis_client import ping_masters as _ping_masters
from ..backends._redis_client import refusal as _refusal
from ..backends._redis_client import server_text as _server_text
from ..backends._redis_url import RedisTarget, check_deployment, parse_redis_url
from ..errors import ConfigurationError, StateUnavailableError
from .autopipe import KeyBatcher

__all__ = ["BLOCK_SECONDS", "RedisLink", "Script"]

logger = logging.getLogger("fastapi_mcp_ctx")

BLOCK_SECONDS: Final = 5.0
"""The longest single ``XREAD BLOCK`` (a longer wait is several of them)."""

Script = _Script



async def _loaded(c: _Client) -> Any:
    """The cluster client with its slot map loaded (LoopClient.attempt loads it first)."""
    return c.redis


def _slot_ranges(cluster: Any) -> dict[str, str]:
    """Each master's slots as ``a-b,c-d`` (from the client's slot map)."""
    owners: dict[str, list[tuple[int, int]]] = {}
    for slot in range(16384):
        nodes: list[Any] = cluster.nodes_manager.slots_cache.get(slot) or []
        if not nodes:
            continue
        spans = owners.setdefault(str(nodes[0].name), [])
        if spans and spans[-1][1] == slot - 1:
            spans[-1] = (spans[-1][0], slot)
        else:
            spans.append((slot, slot))
    return {name: ",".join(f"{a}-{b}" for a, b in spans) for name, spans in owners.items()}


class RedisLink:
    """The clients of one ``MCP_SESSION_STORE_URL`` (``redis://…``, ``rediss://…``,
    ``redis+cluster://…``, ``redis+sentinel://…``: :mod:`..backends._redis_url`).

    Args:
        url: the Redis URL (parsed now: a malformed one raises ``ValueError`` here).
        namespace: prefix of every key and channel the replica stores use.
        timeout: connect / read timeout of a command, in seconds.
        max_connections: in-flight commands at most (per event loop).
        pool_timeout: longest wait for a free command slot, in seconds.
    """

    def __init__(
        self, url: str, *, namespace: str = "mcp:", timeout: float = 2.0, max_connections: int = 64, pool_timeout: float = 5.0
    ) -> None:
        self.url = url
        self.target: RedisTarget = parse_redis_url(url)  # no I/O
        self.namespace = namespace
        self.db = self.target.db
        self.timeout = timeout
        target = self.target
        self._commands: PerLoop[_Client] = PerLoop(
            lambda: _Client(_client_from_url(url, timeout, max_connections), True, _Slots(max_connections, pool_timeout), target),
            _Client.aclose,
        )
        self._batchers: list[KeyBatcher] = []
        self._blocking: PerLoop[_Client] = PerLoop(
            lambda: _Client(_client_from_url(url, timeout + BLOCK_SECONDS, 2**16), True, _Slots(2**31 - 1, pool_timeout), target),
            _Client.aclose,
        )

    def commands(self) -> _Client:
        """The command client of the running loop."""
        return self._commands.get()

    def blocking(self) -> _Client:
        """The client of blocking reads of the running loop."""
        return self._blocking.get()

    def unavailable(self, exc: BaseException, what: str) -> StateUnavailableError | ConfigurationError:
        """The error a failed Redis call is raised as (``what``: the store, for the message)."""
        refusal = _refusal(exc)
        if refusal is not None:
            refusal = refusal.replace("MCP_STORAGE_URL", "MCP_SESSION_STORE_URL")
            logger.error("redis %s refused: %s (%s: %s)", what, refusal, type(exc).__name__, _server_text(exc))
            return ConfigurationError(f"the {what} (redis) is unusable: {refusal}; the server log has Redis's error.")
        logger.warning("redis %s unavailable: %s: %s", what, type(exc).__name__, _server_text(exc))
        return StateUnavailableError(f"The {what} (redis) is unavailable, retry later")

    async def attempt(self, what: str, work: Callable[[_Client], Awaitable[Any]], *, idempotent: bool) -> Any:
        """``await work(client)`` on this loop's command client, once more after a broken
        connection or a failover reply when ``idempotent`` (never otherwise: a command whose
        reply was lost may have run, and must not run twice); errors as :meth:`call`."""
        return await self._commands.get().attempt(work, lambda exc: self.unavailable(exc, what), idempotent=idempotent)

    async def call(self, what: str, *args: Any, idempotent: bool = True) -> Any:
        """Run one command (``what`` names the store in errors); retried once when ``idempotent``.

        Raises:
            StateUnavailableError: Redis cannot be reached. ConfigurationError: Redis refuses.
        """
        return await self.attempt(what, lambda c: c.exec(*args), idempotent=idempotent)

    async def eval(self, what: str, script: _Script, keys: Sequence[str], args: Sequence[str | int], *, idempotent: bool) -> Any:
        """Run a Lua script (EVALSHA, EVAL after a script-cache flush); errors as :meth:`call`.
        ``idempotent``: running it twice leaves what running it once does (then one retry)."""
        return await self.attempt(what, lambda c: c.eval(script, keys, args), idempotent=idempotent)

    def batcher(
        self, what: str, script: _Script, *, fixed_key: str, argv: Sequence[str | int], node: tuple[str, int] | None = None
    ) -> KeyBatcher:
        """A :class:`~.autopipe.KeyBatcher` of ``script`` on this deployment (closed by :meth:`aclose`);
        its failures are translated as :meth:`call`'s (``what`` names the store). ``node``: on a
        cluster, the master it talks to (one ``EVALSHA`` per key, pipelined)."""
        batcher = KeyBatcher(
            self.target,
            script,
            fixed_key=fixed_key,
            argv=argv,
            translate=lambda exc: self.unavailable(exc, what),
            timeout=self.timeout,
            node=node,
        )
        self._batchers.append(batcher)
        return batcher

    async def ping(self) -> None:
        """One PING (on a cluster, one per master: raises only when every master is down).
        Raises as :meth:`call`."""
        if not self.target.sharded:
            await self.call("session store", "PING")
            return
        shards = await self.shards()
        if shards and all(v.startswith("unavailable") for v in shards.values()):
            raise StateUnavailableError("The session store (redis cluster) is unavailable: no master answers, retry later")

    async def check(self) -> None:
        """:meth:`ping`, and refuse a ``redis://`` URL that names a node of a Redis Cluster.

        Raises:
            ConfigurationError: the URL should be ``redis+cluster://…``. Else as :meth:`call`.
        """
        await self.ping()
        target = self.target
        problem = await self.attempt("session store", lambda c: check_deployment(target, c.exec), idempotent=True)
        if problem is not None:
            logger.error("redis session store misconfigured: %s", problem)
            raise ConfigurationError(f"MCP_SESSION_STORE_URL: {problem}")

    async def shards(self) -> dict[str, str]:
        """On a cluster, each master (``host:port``) and whether it answers a PING within
        ``timeout`` s: ``"ok, slots 0-5460"`` or ``"unavailable: …, slots …"`` (the sessions,
        streams and tenants hashed to those slots get 503 + ``Retry-After`` meanwhile). ``{}``
        on one Redis or a sentinel group. A master that did not answer makes the next call
        reload the slot map (a failover promotes its replica)."""
        if not self.target.sharded:
            return {}
        cluster: Any = self.commands().redis
        if not cluster.nodes_manager.slots_cache:  # never used yet: load the slot map
            cluster = await self.attempt("session store", _loaded, idempotent=True)
        ranges = _slot_ranges(cluster)
        answers = await _ping_masters(cluster, self.timeout / 2)  # within the readiness probe's own 2 s
        return {
            name: f"ok, slots {ranges.get(name, 'none')}" if why is None else f"unavailable: {why}, slots {ranges.get(name, 'none')}"
            for name, why in answers.items()
        }

    async def aclose(self) -> None:
        """Close this loop's pools (and ask other loops to close theirs); the next call reconnects."""
        for batcher in self._batchers:
            await batcher.aclose()
        await self._commands.aclose()
        await self._blocking.aclose()
