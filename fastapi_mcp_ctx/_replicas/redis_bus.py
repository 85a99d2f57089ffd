"""The replica bus on Redis pub/sub: a :class:`~fastapi_mcp_ctx._transport.bus.MessageBus`
shared by every replica, supervised.

Channel ``<name>`` is the Redis channel ``<ns><db>:bus:<name>`` (pub/sub ignores database
numbers, so the database is part of the name: two deployments on one server with different
``/N`` never hear each other). Each event loop that uses the bus has one subscriber
connection and one reader task (:mod:`..backends._loops`): the reader delivers every message
to the handlers of its channel in this process, each handler once, with its own decoded copy.

Supervision: when the subscriber connection breaks (Redis restarted, the network cut) the
reader reconnects with exponential backoff (0.05 s doubling to 2 s) and subscribes again to
every channel that still has a handler, so GET streams, listen streams and the relay receive
again without any client reconnecting. Messages published while a replica was disconnected
are not replayed (pub/sub is at-most-once, like the Protocol): what must survive is in the
event log. A ``PING`` every :data:`_PING_SECONDS` detects a silent dead connection.

:meth:`publish` returns how many subscriber *connections* (replicas) received the message;
:meth:`channels` asks ``PUBSUB CHANNELS`` (every replica's subscriptions).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Final, cast

from pydantic_core import from_json
from redis.exceptions import SlotNotCoveredError

from .._transport.bus import Handler, Unsubscribe, add_handler, encode_message
from ..backends._loops import PerLoop
from ..backends._redis_client import FAILURES
from ..errors import StateUnavailableError
from .link import RedisLink

__all__ = ["RedisBus"]

logger = logging.getLogger("fastapi_mcp_ctx")

_WHAT: Final = "replica bus"
_PING_SECONDS: Final = 5.0
_ALIVE: Final = "~alive"


_SHARDED_KINDS: Final = {"ssubscribe": "subscribe", "sunsubscribe": "unsubscribe", "smessage": "message"}


def _glob_escape(text: str) -> str:
    return "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in text)


class _Subscriber:
    """One event loop's subscriber connection, its reader task and its handlers (on a cluster:
    one shard's, see :class:`_Shards`)."""

    def __init__(self, bus: RedisBus, lane: _Lane | None = None) -> None:
        self.bus = bus
        self.lane = lane
        self.alive = _ALIVE if lane is None else lane.alive
        self.verb, self.unverb = ("subscribe", "unsubscribe") if lane is None else ("ssubscribe", "sunsubscribe")
        self.handlers: dict[str, list[Handler]] = {}
        self.live: set[str] = set()  # channels Redis confirmed on the current connection
        self.waiters: dict[str, asyncio.Event] = {}
        self.pubsub: Any = None
        self.connected = asyncio.Event()
        self.failed = asyncio.Event()  # the last connection attempt failed (cleared once connected)
        self.task = asyncio.get_running_loop().create_task(self._run(), name="fastapi-mcp-ctx replica bus")

    async def _run(self) -> None:
        delay = 0.05
        while True:
            pubsub: Any = None
            try:
                redis: Any = self.bus.link.commands().redis
                pubsub = redis.pubsub() if self.lane is None else await self.lane.pubsub()
                # ~alive last: once it is confirmed, every channel before it is live again
                await getattr(pubsub, self.verb)(*[self.bus.prefix + c for c in (*self.handlers, self.alive)])
                self.pubsub = pubsub
                pinged = asyncio.get_running_loop().time()
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None:
                        self._on(cast("dict[str, Any]", message))
                        if self.connected.is_set():
                            delay = 0.05
                    now = asyncio.get_running_loop().time()
                    if now - pinged >= _PING_SECONDS:
                        pinged = now
                        await pubsub.ping()
            except FAILURES as exc:  # the cluster client's RedisClusterException (no slot map, no node) too
                if self.connected.is_set():
                    logger.warning("replica bus lost Redis (%s: %s); reconnecting", type(exc).__name__, exc)
                self.failed.set()  # subscribers waiting for a connection give up now, not at their timeout
            finally:
                self.pubsub = None
                self.connected.clear()
                self.live.clear()
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _on(self, message: dict[str, Any]) -> None:
        kind = str(message.get("type"))
        kind = _SHARDED_KINDS.get(kind, kind)
        channel = str(message.get("channel", ""))[len(self.bus.prefix) :]
        if kind == "subscribe":
            if channel == self.alive:
                if self.lane is not None:
                    self.lane.stale = False
                self.connected.set()
                self.failed.clear()
                logger.debug("replica bus connected")
            self.live.add(channel)
            waiter = self.waiters.pop(channel, None)
            if waiter is not None:
                waiter.set()
        elif kind == "unsubscribe":
            self.live.discard(channel)
            if channel in self.handlers and self.pubsub is not None:  # subscribed again meanwhile
                self._spawn(getattr(self.pubsub, self.verb)(self.bus.prefix + channel))
        elif kind == "message":
            handlers = tuple(self.handlers.get(channel, ()))
            data = str(message.get("data"))
            for handler in handlers:
                try:
                    handler(from_json(data))
                except Exception:  # noqa: BLE001 - one broken handler must not starve the others
                    logger.exception("bus handler on channel %r failed", channel)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        task.add_done_callback(_quiet)

    async def subscribe(self, channel: str, handler: Handler, timeout: float) -> Unsubscribe:
        first = channel not in self.handlers
        unsubscribe = add_handler(self.handlers, channel, handler, self._emptied)

        if channel in self.live:
            return unsubscribe
        waiter = self.waiters.setdefault(channel, asyncio.Event())
        try:
            async with asyncio.timeout(timeout):
                if first and self.pubsub is not None and self.connected.is_set():
                    await getattr(self.pubsub, self.verb)(self.bus.prefix + channel)
                if not await self._confirmed(waiter):  # when disconnected, the reader subscribes on reconnect
                    raise ConnectionError("the replica bus's last connection attempt failed")
        except (TimeoutError, *FAILURES) as exc:
            unsubscribe()
            raise StateUnavailableError("The replica bus (redis) is unavailable, retry later") from exc
        return unsubscribe

    async def _confirmed(self, waiter: asyncio.Event) -> bool:
        """True once Redis confirmed the subscription; False as soon as a connection attempt
        fails while not connected (an outage answers at once, not after the whole timeout)."""
        if waiter.is_set():
            return True
        if self.failed.is_set() and not self.connected.is_set():
            return False
        confirmed = asyncio.ensure_future(waiter.wait())
        failed = asyncio.ensure_future(self.failed.wait())
        try:
            await asyncio.wait((confirmed, failed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            confirmed.cancel()
            failed.cancel()
        return waiter.is_set()

    def _emptied(self, channel: str) -> None:
        if self.pubsub is not None:
            self._spawn(self._release(channel))

    async def _release(self, channel: str) -> None:
        if channel not in self.handlers and self.pubsub is not None:
            await getattr(self.pubsub, self.unverb)(self.bus.prefix + channel)

    async def aclose(self) -> None:
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task
        self.handlers.clear()


def _alive_for(prefix: str, slot: int) -> str:
    """A channel name (after ``prefix``) whose slot is ``slot``: a shard's own ``~alive``."""
    from redis.crc import key_slot

    n = 0
    while key_slot((prefix + f"{_ALIVE}{{{n}}}").encode()) != slot:
        n += 1
    return f"{_ALIVE}{{{n}}}"


class _Lane:
    """On a cluster: the slots one master held when a channel was first subscribed there; its
    connection goes to whichever node holds ``slot`` now (after a failover: the promoted replica)."""

    def __init__(self, bus: RedisBus, slot: int) -> None:
        self.bus = bus
        self.slot = slot
        self.alive = _alive_for(bus.prefix, slot)
        self.stale = False

    async def pubsub(self) -> Any:
        from redis.asyncio import Redis

        cluster: Any = self.bus.link.commands().redis
        if self.stale or not cluster.nodes_manager.slots_cache:  # the last connection failed, or no map yet: ask the cluster
            await cluster.nodes_manager.initialize()
        self.stale = True  # until a connection is confirmed
        try:
            node = cluster.nodes_manager.get_node_from_slot(self.slot)
        except (KeyError, IndexError) as exc:  # redis-py 8.1: a KeyError when the slot map is empty
            raise SlotNotCoveredError(f"no node of the cluster holds slot {self.slot}") from exc
        target = self.bus.link.target
        client: Any = Redis(
            host=node.host,
            port=node.port,
            username=target.username,
            password=target.password,
            ssl=target.ssl,
            decode_responses=True,
            socket_connect_timeout=self.bus.link.timeout,
        )
        return client.pubsub()


class _Shards:
    """On a cluster, one event loop's bus: a :class:`_Subscriber` per master (sharded pub/sub,
    ``SSUBSCRIBE``), each channel on the one that holds its slot."""

    def __init__(self, bus: RedisBus) -> None:
        self.bus = bus
        self.lanes: dict[str, _Subscriber] = {}  # the master's name when the lane was made
        self.of_channel: dict[str, _Subscriber] = {}

    def _lane(self, channel: str) -> _Subscriber:
        from redis.crc import key_slot

        known = self.of_channel.get(channel)
        if known is not None:
            return known
        cluster: Any = self.bus.link.commands().redis
        slot = key_slot((self.bus.prefix + channel).encode())
        try:
            name = str(cluster.nodes_manager.get_node_from_slot(slot).name)
        except Exception:  # noqa: BLE001 - the slot map is not loaded yet: a lane of its own
            name = f"slot:{slot}"
        sub = self.lanes.get(name)
        if sub is None:
            sub = self.lanes[name] = _Subscriber(self.bus, _Lane(self.bus, slot))
        self.of_channel[channel] = sub
        return sub

    async def subscribe(self, channel: str, handler: Handler, timeout: float) -> Unsubscribe:
        cluster: Any = self.bus.link.commands().redis
        if not cluster.nodes_manager.slots_cache:
            with contextlib.suppress(*FAILURES):  # no node answers: the lane's reader retries, subscribe() answers 503
                await cluster.initialize()
        return await self._lane(channel).subscribe(channel, handler, timeout)

    @property
    def connected(self) -> asyncio.Event:
        done = asyncio.Event()
        if all(s.connected.is_set() for s in self.lanes.values()):
            done.set()
        return done

    async def aclose(self) -> None:
        for sub in self.lanes.values():
            await sub.aclose()


def _quiet(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.debug("replica bus (un)subscribe failed: %s", task.exception())


class RedisBus:
    """A :class:`~fastapi_mcp_ctx._transport.bus.MessageBus` on Redis pub/sub (see the module docstring).

    Args:
        link: the Redis clients.
        timeout: how long :meth:`subscribe` waits for Redis to confirm, in seconds (then
            :class:`~fastapi_mcp_ctx.errors.StateUnavailableError`).
    """

    shared = True

    def __init__(self, link: RedisLink, *, timeout: float = 3.0) -> None:
        self.link = link
        self.prefix = f"{link.namespace}{link.db}:bus:"
        self.timeout = timeout
        self.sharded = link.target.sharded
        self._loops: PerLoop[_Subscriber] = PerLoop(lambda: _Subscriber(self), _Subscriber.aclose)
        self._shards: PerLoop[_Shards] = PerLoop(lambda: _Shards(self), _Shards.aclose)

    async def publish(self, channel: str, message: Mapping[str, Any]) -> int:
        encoded = encode_message(message)
        verb = "SPUBLISH" if self.sharded else "PUBLISH"  # a cluster: only the shard holding the channel hears it
        return int(await self.link.call(_WHAT, verb, self.prefix + channel, encoded))

    async def subscribe(self, channel: str, handler: Handler) -> Unsubscribe:
        if self.sharded:
            return await self._shards.get().subscribe(channel, handler, self.timeout)
        return await self._loops.get().subscribe(channel, handler, self.timeout)

    async def channels(self, prefix: str) -> list[str]:
        pattern = _glob_escape(self.prefix + prefix) + "*"
        if self.sharded:
            found: Any = await self.link.attempt(
                _WHAT, lambda c: c.exec("PUBSUB SHARDCHANNELS", pattern, target_nodes="primaries"), idempotent=True
            )
            per_node = cast("dict[str, list[str]]", found).values() if isinstance(found, dict) else [cast("list[str]", found)]
            names = {str(n) for v in per_node for n in v}
        else:
            names = set(cast("list[str]", await self.link.call(_WHAT, "PUBSUB", "CHANNELS", pattern)))
        cut = len(self.prefix)
        return sorted(name[cut:] for name in names)

    async def connected(self) -> bool:
        """Whether this loop's subscriber connection is up (starting it when it is not); on a
        cluster, whether any of this loop's shard connections is (none yet: True)."""
        if self.sharded:
            subscribers = list(self._shards.get().lanes.values())
        else:
            subscribers = [self._loops.get()]
        waiting = [s.connected.wait() for s in subscribers if not s.connected.is_set()]
        if waiting:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.timeout):
                    await asyncio.gather(*waiting)
        if self.sharded:  # a shard down stops its channels only (readiness names it: shards)
            return not subscribers or any(s.connected.is_set() for s in subscribers)
        return all(s.connected.is_set() for s in subscribers)

    async def aclose(self) -> None:
        await self._loops.aclose()
        await self._shards.aclose()
