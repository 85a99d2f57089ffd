"""One Redis deployment shared by the replica stores (sessions, events, bus): its clients.

The same redis-py asyncio client family and per-loop pool handling as ``ctx.state``'s
:class:`~fastapi_mcp_ctx.backends.redis.RedisBackend` (:mod:`..backends._loops`): a pool is
made, without I/O, on the first call from each running event loop. Two pools per loop:

- *commands*: short commands and Lua scripts, at most ``max_connections`` in flight (a caller
  waits at most ``pool_timeout`` seconds for a slot);
- *blocking*: ``XREAD BLOCK`` of the SSE tails, one connection per waiting reader (unbounded:
  each open SSE connection holds one while it waits), with a socket timeout longer than the
  longest block (:data:`BLOCK_SECONDS`).

:meth:`RedisLink.eval_batched` pipelines the scripts that callers start in the same event-loop
turn (the session lookups of concurrent requests) into one round trip on one connection: each
caller still gets its own reply or error, and the cost of a round trip is shared.

Every failure is translated at this edge: an outage (refused, reset, timed out, a transient
error reply) is :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` (HTTP 503 +
``Retry-After``), a refusal that repeats until the operator acts (credentials, ACL, database
number) a :class:`~fastapi_mcp_ctx.errors.ConfigurationError`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from redis.exceptions import NoScriptError, RedisError

from ..backends._loops import PerLoop
from ..backends.redis import _Client, _client_from_url, _refusal, _Script, _server_text, _Slots  # pyright: ignore[reportPrivateUsage]
from ..errors import ConfigurationError, StateUnavailableError

__all__ = ["BLOCK_SECONDS", "RedisLink", "Script"]

logger = logging.getLogger("fastapi_mcp_ctx")

BLOCK_SECONDS: Final = 5.0
"""The longest single ``XREAD BLOCK`` (a longer wait is several of them)."""

Script = _Script


def _db_of(url: str) -> int:
    path = urlsplit(url).path.strip("/")
    return int(path) if path.isdigit() else 0


class RedisLink:
    """The clients of one ``MCP_SESSION_STORE_URL`` (``redis://…`` / ``rediss://…``).

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
        self.namespace = namespace
        self.db = _db_of(url)
        self.timeout = timeout
        _client_from_url(url, timeout, 1)  # parses the URL now (no I/O)
        self._commands: PerLoop[_Client] = PerLoop(
            lambda: _Client(_client_from_url(url, timeout, max_connections), True, _Slots(max_connections, pool_timeout)),
            _Client.aclose,
        )
        self._batches: PerLoop[_Batch] = PerLoop(_Batch, _Batch.aclose)
        self._blocking: PerLoop[_Client] = PerLoop(
            lambda: _Client(_client_from_url(url, timeout + BLOCK_SECONDS, 2**31), True, _Slots(2**31 - 1, pool_timeout)),
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

    async def call(self, what: str, *args: Any) -> Any:
        """Run one command (``what`` names the store in errors).

        Raises:
            StateUnavailableError: Redis cannot be reached. ConfigurationError: Redis refuses.
        """
        c = self._commands.get()
        async with c.slots:
            try:
                return await c.exec(*args)
            except (RedisError, OSError) as exc:
                raise self.unavailable(exc, what) from exc

    async def eval(self, what: str, script: _Script, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        """Run a Lua script (EVALSHA, EVAL after a script-cache flush); errors as :meth:`call`."""
        c = self._commands.get()
        async with c.slots:
            try:
                return await c.eval(script, keys, args)
            except (RedisError, OSError) as exc:
                raise self.unavailable(exc, what) from exc

    async def eval_batched(self, what: str, script: _Script, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        """Like :meth:`eval`, pipelined with the other scripts started in this loop turn."""
        batch = self._batches.get()
        if batch.scheduled:  # a leader collects this turn's scripts: join it
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            batch.pending.append((script, keys, args, future))
            return await future
        batch.scheduled = True
        try:
            await asyncio.sleep(0)  # let the other requests of this turn join
        finally:
            batch.scheduled = False
        followers, batch.pending = batch.pending, []
        if not followers:
            return await self.eval(what, script, keys, args)
        mine: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._flush([(script, keys, args, mine), *followers], what)
        return await mine

    async def _flush(self, items: list[tuple[_Script, Sequence[str], Sequence[str | int], asyncio.Future[Any]]], what: str) -> None:
        batch = self._batches.get()
        c = self._commands.get()
        try:
            async with c.slots:
                redis: Any = c.redis
                pipe: Any = redis.pipeline(transaction=False)
                for script, keys, args, _ in items:
                    pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
                results: list[Any] = await pipe.execute(raise_on_error=False)
        except BaseException as exc:  # noqa: BLE001 - every waiter gets the failure
            error = self.unavailable(exc, what) if isinstance(exc, (RedisError, OSError)) else exc
            for *_, future in items:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(exc, Exception):
                raise
            return
        for (script, keys, args, future), result in zip(items, results):
            if future.done():
                continue
            if isinstance(result, NoScriptError):  # script cache flushed (a restart): EVAL loads it
                batch.spawn(self._single(what, script, keys, args, future))
            elif isinstance(result, BaseException):
                future.set_exception(self.unavailable(result, what))
            else:
                future.set_result(result)

    async def _single(self, what: str, script: _Script, keys: Sequence[str], args: Sequence[str | int], future: asyncio.Future[Any]) -> None:
        try:
            result = await self.eval(what, script, keys, args)
        except Exception as exc:  # noqa: BLE001 - handed to the waiter
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(result)

    async def ping(self) -> None:
        """One PING. Raises as :meth:`call`."""
        await self.call("session store", "PING")

    async def aclose(self) -> None:
        """Close this loop's pools (and ask other loops to close theirs); the next call reconnects."""
        await self._batches.aclose()
        await self._commands.aclose()
        await self._blocking.aclose()


class _Batch:
    """The scripts waiting to be pipelined on one loop, and its flush tasks."""

    def __init__(self) -> None:
        self.pending: list[tuple[_Script, Sequence[str], Sequence[str | int], asyncio.Future[Any]]] = []
        self.scheduled = False
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def aclose(self) -> None:
        for task in tuple(self.tasks):
            task.cancel()
