"""Auto-pipelining of one read-mostly Lua script over many keys (the session lookups of concurrent requests).

The callers of :meth:`KeyBatcher.run` that arrive while the batcher's connections are busy, or in
the same event-loop turn, are answered by ONE ``EVALSHA`` over all their keys (``KEYS[1]`` the
script's fixed key, ``KEYS[2..]`` the batch's distinct keys, ``ARGV`` the batcher's fixed
arguments; the script returns one answer per batch key, in order). Each caller gets the answer
Redis gave for its own key in a round trip sent after it called: nothing is cached between
round trips, so a Redis that stopped answering can never make a key "valid".

The round trips go on a few connections of their own per event loop (made by redis-py from the
store's URL, so credentials, database and TLS are the pool's), one batch in flight on each; the
keys that arrive meanwhile wait and leave together as soon as a connection is free (group
commit: the busier the server, the larger the batch and the cheaper each lookup). A caller that
finds nothing waiting and a connection free lets one loop turn pass (callers of the same turn join
it, and the batch then goes to a driver task as under load); still alone, it makes the round trip
in its own task: no driver task, no future (the quiet server's usual lookup). No redis-py
pool, pipeline, retry wrapper or per-command ``wait_for`` on this path: one packed command, one
write, one reply read under one deadline (``timeout`` seconds); the write and the read themselves
are :mod:`.resp_io`'s.

Failures, all on the same path as :meth:`~.link.RedisLink.eval`: a refused or reset connection, a
timeout, an error reply fail EVERY caller of the batch with the link's translation
(:class:`~fastapi_mcp_ctx.errors.StateUnavailableError`, 503 + ``Retry-After``; a refusal that
needs the operator is a :class:`~fastapi_mcp_ctx.errors.ConfigurationError`), and the connection
is dropped, never reused with a reply unread. A connection that was open before the batch and
fails at once (Redis restarted since) is replaced and the batch sent once more (the script only
reads and refreshes expiries: running it twice is harmless); ``NOSCRIPT`` (a flushed script
cache) resends it as ``EVAL``. A caller cancelled while waiting leaves the batch running for
the others.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable, Generator, Sequence
from typing import Any, Final, cast

from redis.asyncio.connection import ConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError

from ..backends._loops import PerLoop
from ..backends._redis_client import FAILURES
from ..backends._redis_client import Script as _Script
from ..backends._redis_url import RedisTarget
from ..backends._timeout import Deadline
from ..errors import StateUnavailableError
from .resp_io import ask, reply, send

__all__ = ["MAX_BATCH", "KeyBatcher"]

MAX_BATCH: Final = 256
"""Distinct keys per round trip at most (the rest leave with the next one)."""

_Waiters = dict[str, list["asyncio.Future[Any]"]]


class KeyBatcher:
    """One multi-key script, auto-pipelined per event loop (see the module docstring).

    Args:
        target: the Redis deployment (one server, or a sentinel group's master; not a cluster).
        script: the Lua script: ``KEYS[1]`` = ``fixed_key``, ``KEYS[2..]`` the batch, returning
            an array of one answer per batch key.
        fixed_key: the script's first key (shared by every batch).
        argv: the script's arguments (shared by every batch).
        translate: ``translate(exc)`` is the error a caller gets for a Redis failure ``exc``.
        timeout: connect + write + read deadline of one round trip, in seconds.
        connections: round trips in flight at most, per event loop.
        max_batch: distinct keys per round trip at most.
        node: on a Redis Cluster, the master (host, port) this batcher talks to. Keys of
            different slots cannot share a script there, so each key gets its own ``EVALSHA``
            (``KEYS[1]`` the key, no fixed key), all of a batch pipelined in one write; an error
            reply (``MOVED`` after a failover) is that key's answer, raised to its caller alone.
    """

    def __init__(
        self,
        target: RedisTarget,
        script: _Script,
        *,
        fixed_key: str,
        argv: Sequence[str | int],
        translate: Callable[[BaseException], Exception],
        timeout: float,
        connections: int = 2,
        max_batch: int = MAX_BATCH,
        node: tuple[str, int] | None = None,
    ) -> None:
        if connections < 1 or max_batch < 1:
            raise ValueError("connections and max_batch must be at least 1")
        self.script = script
        self.fixed_key = fixed_key
        self.argv = tuple(argv)
        self.translate = translate
        self.timeout = timeout
        self.max_batch = max_batch
        self.per_key = node is not None
        self.round_trips = 0  # sent batches (every attempt), for tests and benchmarks
        # No socket timeout on the connection: one asyncio deadline per round trip instead
        # (redis-py would wrap each write in wait_for, a task per command); no retry of its own.
        def factory() -> ConnectionPool:
            return target.pool(timeout=timeout, node=node)

        factory()  # parses the URL now (no I/O)
        self._lanes: PerLoop[_Lane] = PerLoop(lambda: _Lane(self, factory(), connections), _Lane.aclose)

    async def run(self, key: str) -> Any:
        """The script's answer for ``key``, from a round trip sent after this call.

        Raises:
            StateUnavailableError / ConfigurationError: as ``translate`` makes them (every
            caller of a failed batch gets one).
        """
        lane = self._lanes.get()
        if lane.idle and not lane.kicked:  # nothing waits and a connection is free
            return await lane.solo(key)
        return await lane.join(key)

    async def aclose(self) -> None:
        """Drop this loop's connections (and ask other loops to drop theirs); waiters get 503."""
        await self._lanes.aclose()


class _Lane:
    """One event loop's connections, waiting keys and driver tasks."""

    def __init__(self, batcher: KeyBatcher, pool: ConnectionPool, connections: int) -> None:
        self.batcher = batcher
        self.loop = asyncio.get_running_loop()
        self.pool = pool
        self.idle: list[Any] = [pool.make_connection() for _ in range(connections)]  # not connected yet
        self.pending: _Waiters = {}
        self.kicked = False
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False  # aclose ran: a connection coming back from a caller's round trip is dropped
        encoder = pool.get_encoder()
        self._encode: Callable[[str | int], bytes] = encoder.encode  # the connections' own (its encoding and errors)
        self._encoding: tuple[str, str] = (encoder.encoding, encoder.encoding_errors)  # what it does to a str
        self._parts: tuple[bytes, bytes, bytes, bytes, int] | None = None  # see _packed

    def join(self, key: str) -> asyncio.Future[Any]:
        """Wait with the batch leaving next (a driver task sends it)."""
        future: asyncio.Future[Any] = self.loop.create_future()
        waiters = self.pending.get(key)
        if waiters is None:
            self.pending[key] = [future]
        else:
            waiters.append(future)
        if self.idle and not self.kicked:
            self.kicked = True
            self.loop.call_soon(self.kick)  # after the other callers of this loop turn joined
        return future

    async def solo(self, key: str) -> Any:
        """The lookup of a caller that found nothing waiting: it yields once, so the callers of
        the same loop turn join it; alone, it makes the round trip itself, in its own task (no
        driver task, no future); joined, its batch goes on a driver task like any other (so a
        cancelled caller never takes the others' round trip with it)."""
        conn = self.idle.pop()
        self.kicked = True  # the callers of this turn wait in ``pending``; this one decides after it
        try:
            await _one_turn()
        except BaseException:  # cancelled while collecting: whoever joined leaves without it
            self.kicked = False
            await self._release(conn)
            raise
        self.kicked = False
        if self.pending:
            joined, self.pending = self.pending, {key: [self.loop.create_future()]}
            for other, waiters in joined.items():
                if other == key:
                    self.pending[key] += waiters
                else:
                    self.pending[other] = waiters
            future = self.pending[key][0]
            await self._release(conn)
            return await future
        try:
            answers = await self._round_trip(conn, [key])
        except BaseException as exc:
            if isinstance(exc, Exception):
                await conn.disconnect(nowait=True)  # never read another batch's reply
            else:  # cancelled: the reply is unread
                await asyncio.shield(conn.disconnect(nowait=True))
            await self._release(conn)
            if isinstance(exc, FAILURES):  # TimeoutError is an OSError
                raise self.batcher.translate(exc) from exc
            raise
        await self._release(conn)
        answer = answers[0]
        if isinstance(answer, BaseException):  # per key: its own error reply
            raise answer
        return answer

    async def _release(self, conn: Any) -> None:
        """Give ``conn`` back; what waited meanwhile leaves now. A lane closed meanwhile drops it."""
        if self.closed:
            await conn.disconnect(nowait=True)
            return
        self.idle.append(conn)
        if self.pending:
            self.kick()

    def kick(self) -> None:
        self.kicked = False
        while self.pending and self.idle:
            task = self.loop.create_task(self._drive(self.idle.pop(), self._take()))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _take(self) -> _Waiters:
        pending = self.pending
        if len(pending) <= self.batcher.max_batch:
            self.pending = {}
            return pending
        batch: _Waiters = {}
        for key in list(pending)[: self.batcher.max_batch]:
            batch[key] = pending.pop(key)
        return batch

    async def _drive(self, conn: Any, batch: _Waiters) -> None:
        """Send batches on ``conn`` until nothing waits, then give it back."""
        try:
            while batch:
                try:
                    answers = await self._round_trip(conn, list(batch))
                except Exception as exc:  # noqa: BLE001 - every caller of the batch gets it
                    await conn.disconnect(nowait=True)  # never read another batch's reply
                    redis_failure = isinstance(exc, FAILURES)  # TimeoutError is an OSError
                    _fail(batch, self.batcher.translate(exc) if redis_failure else exc)
                else:
                    for waiters, answer in zip(batch.values(), answers):
                        for future in waiters:
                            if future.done():  # a cancelled caller
                                continue
                            if isinstance(answer, BaseException):  # per key: its own error reply
                                future.set_exception(answer)
                            else:
                                future.set_result(answer)
                batch = self._take() if self.pending else {}
        except BaseException:  # cancelled (loop ending, aclose): nobody is left waiting
            await asyncio.shield(conn.disconnect(nowait=True))
            _fail(batch, StateUnavailableError("The session store (redis) is closing, retry later"))
            raise
        self.idle.append(conn)

    async def _round_trip(self, conn: Any, keys: list[str]) -> list[Any]:
        if self.batcher.per_key:
            return await self._round_trip_per_key(conn, keys)
        b = self.batcher
        reused = conn.is_connected
        packed: bytes | None = self._packed(keys)
        async with Deadline(self.loop.time() + b.timeout):
            while True:
                b.round_trips += 1
                try:
                    if not conn.is_connected:  # connect() itself: a sentinel's connection asks where the master is
                        await conn.connect()
                    if packed is None:
                        packed = b"".join(conn.pack_command("EVAL", b.script.source, len(keys) + 1, b.fixed_key, *keys, *b.argv))
                    answers: Any = await ask(conn, packed)
                except NoScriptError:  # script cache flushed (restart, SCRIPT FLUSH): EVAL caches it
                    packed = None
                    continue
                except RedisConnectionError:
                    if not reused:
                        raise
                    reused = False  # a connection Redis dropped while idle: once more on a new one
                    await conn.disconnect(nowait=True)
                    continue
                if not isinstance(answers, list) or len(cast("list[Any]", answers)) != len(keys):
                    kind = type(cast(object, answers)).__name__
                    raise RedisError(f"the batched script answered {kind}, not one answer per key")
                return cast("list[Any]", answers)

    async def _round_trip_per_key(self, conn: Any, keys: list[str]) -> list[Any]:
        """One ``EVALSHA`` per key, pipelined: one write, then one reply per key (an error reply
        is that key's answer). A flushed script cache resends the batch as ``EVAL``."""
        b = self.batcher
        reused = conn.is_connected
        head: tuple[Any, ...] = ("EVALSHA", b.script.sha)
        async with Deadline(self.loop.time() + b.timeout):
            while True:
                b.round_trips += 1
                try:
                    if not conn.is_connected:
                        await conn.connect()
                    await send(conn, b"".join(conn.pack_commands([(*head, 1, k, *b.argv) for k in keys])))
                except RedisConnectionError:
                    if not reused:
                        raise
                    reused = False
                    await conn.disconnect(nowait=True)
                    continue
                answers: list[Any] = []
                for _ in keys:
                    try:
                        answers.append(await reply(conn))
                    except NoScriptError as exc:
                        answers.append(exc)
                    except RedisError as exc:
                        if isinstance(exc, RedisConnectionError):
                            raise
                        answers.append(exc)  # MOVED, CLUSTERDOWN...: this key's answer
                if any(isinstance(a, NoScriptError) for a in answers):
                    head = ("EVAL", b.script.source)
                    continue
                return answers

    def _packed(self, keys: list[str]) -> bytes:
        """``EVALSHA sha numkeys fixed_key *keys *argv`` in RESP, as redis-py's ``pack_command``
        writes it, from the parts that never change (encoded once per lane with the pool's
        encoder) and the batch's keys; a batch of one key (the usual one) from two constant parts."""
        parts = self._parts
        if parts is None:
            b = self.batcher
            sha, fixed = _bulk(self._encode(b.script.sha)), _bulk(self._encode(b.fixed_key))
            argv = b"".join(_bulk(self._encode(arg)) for arg in b.argv)
            one_key = b"*%d\r\n$7\r\nEVALSHA\r\n" % (5 + len(b.argv)) + sha + _bulk(b"2") + fixed
            parts = self._parts = (one_key, sha, fixed, argv, len(b.argv))
        one_key, sha, fixed, argv, n_argv = parts
        encode = self._encode
        if len(keys) == 1:
            key = keys[0]
            key = key.encode(*self._encoding) if type(key) is str else encode(key)  # the encoder's str case, inline
            return b"%s$%d\r\n%s\r\n%s" % (one_key, len(key), key, argv)
        chunks = [b"*%d\r\n$7\r\nEVALSHA\r\n" % (4 + len(keys) + n_argv), sha, _bulk(b"%d" % (len(keys) + 1)), fixed]
        for key in keys:
            chunks.append(_bulk(encode(key)))
        chunks.append(argv)
        return b"".join(chunks)

    async def aclose(self) -> None:
        self.closed = True
        for task in tuple(self.tasks):
            task.cancel()
        for task in tuple(self.tasks):
            try:
                await task
            except BaseException:  # noqa: BLE001, S110 - cancelled on purpose
                pass
        _fail(self.pending, StateUnavailableError("The session store (redis) is closing, retry later"))
        self.pending = {}
        for conn in self.idle:
            await conn.disconnect(nowait=True)


@types.coroutine
def _one_turn() -> Generator[None, None, None]:
    """Let the event loop run the callbacks ready now once (``asyncio.sleep(0)`` without its coroutine)."""
    yield


def _bulk(value: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _fail(batch: _Waiters, error: BaseException) -> None:
    for waiters in batch.values():
        for future in waiters:
            if not future.done():
                future.set_exception(error)
