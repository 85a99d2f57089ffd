"""What one replica forwards to the others over the bus, and runs when the others forward.

Channels (on the router's :class:`~fastapi_mcp_ctx._transport.bus.MessageBus`):

- ``replica.<replica id>``: messages addressed to one replica, only it subscribes. A client's
  answer to a server→client request (``ctx.send_request``) whose id ``"<replica id>:<n>"``
  (:func:`~fastapi_mcp_ctx._transport.pending.origin_of`) names another replica than the one
  the POST reached is published there as ``{"k": "answer", "s": <session>, "id", "result",
  "error"}``; the waiting replica resolves it against its own pending table, with the same
  scope (session) and typed-id rule as a local answer.
- ``replicas``: every replica subscribes; ``{"k": "end", "s"}`` (a session was deleted: close
  its GET stream, cancel its calls, wake its waiters, forget its events), ``{"k": "cancel",
  "s", "r", "why"}`` (``notifications/cancelled`` of a call not running on the replica that
  received it), ``{"k": "get", "s", "x"}`` (a replica opened GET stream ``x`` of the session:
  any other GET stream of it elsewhere retires), ``{"k": "task", "t": <task id>, "op": "cancel" |
  "wake"}`` (a task's record was cancelled or answered where the request landed: the replica
  running it stops its handler or wakes its question, ``_tasks.engine``). Each message carries
  ``"o"``, its sender, and the sender ignores its own.

Exactly once: pub/sub delivers a message once to each subscribed replica, and each kind acts
only where its target lives (the waiter, the in-flight call, the stream), idempotently: a
second delivery finds no waiter, an already cancelled signal, an already ended session. A
message lost in a Redis outage ends like an unanswered request (the waiter times out) or a
cancellation the client repeats; a session's end is also enforced by the shared store (404).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol
from weakref import WeakSet

from .._transport.bus import MessageBus, Unsubscribe, replica_id
from .._transport.pending import PendingRequests, origin_of
from .._transport.sessions import LiveSessions
from .._wire.jsonrpc import JsonRpcResponse, RequestId
from ..errors import ConfigurationError, McpError, StateUnavailableError

__all__ = ["Relay"]

logger = logging.getLogger("fastapi_mcp_ctx")

BROADCAST: Final = "replicas"


def direct_channel(replica: str) -> str:
    """The channel only ``replica`` subscribes to."""
    return f"replica.{replica}"


class _Streams(Protocol):
    async def session_ended(self, session_id: str) -> None: ...
    async def taken_elsewhere(self, session_id: str, stream_id: str) -> None: ...


class _Notifier(Protocol):
    async def session_ended(self, session_id: str) -> None: ...


class Relay:
    """The forwarding of one router (see the module docstring).

    Args:
        bus: the router's bus.
        identity: this replica's id (default :func:`replica_id`; tests give each router its own).
    """

    started: bool
    """Subscribed, as this process's current identity: a plain attribute the endpoint reads per
    request (no call), made False by :meth:`stop`, a fork (the child starts again under its own
    identity) and a new :attr:`identity`."""

    def __init__(self, bus: MessageBus, identity: Callable[[], str] = replica_id) -> None:
        self.bus = bus
        self._identity = identity
        self.started = False
        _RELAYS.add(self)
        self._as: str | None = None
        self._unsubscribe: list[Unsubscribe] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._live: LiveSessions | None = None
        self._pending: PendingRequests | None = None
        self._streams: _Streams | None = None
        self._notifier: _Notifier | None = None
        self._tasks_handler: Callable[[dict[str, Any]], object] | None = None

    @property
    def identity(self) -> Callable[[], str]:
        """This replica's id, as a function (called at :meth:`start` and per forwarded message)."""
        return self._identity

    @identity.setter
    def identity(self, identity: Callable[[], str]) -> None:
        self._identity = identity
        self.started = False  # the next request subscribes again under the new id

    def origin(self) -> str:
        """The origin of this replica's server→client request ids."""
        return self.identity()

    def bind(self, *, live: LiveSessions, pending: PendingRequests, streams: _Streams, notifier: _Notifier) -> None:
        """Name what forwarded messages act on (the router's collaborators)."""
        self._live, self._pending, self._streams, self._notifier = live, pending, streams, notifier

    def bind_tasks(self, handler: Callable[[dict[str, Any]], object]) -> None:
        """Name what a relayed ``task`` message acts on (the router's task engine)."""
        self._tasks_handler = handler

    async def forward_task(self, message: dict[str, Any]) -> None:
        """Tell every other replica about a task (``{"k": "task", "t", "op"}``)."""
        await self._broadcast(message)

    async def start(self) -> None:
        """Subscribe this replica's channels (at its first request, after any fork). A bus that
        cannot be reached is retried at the next request; meanwhile nothing is forwarded here."""
        me = self.identity()
        if self._as == me:
            self.started = True
            return
        self.stop()
        try:
            self._unsubscribe.append(await self.bus.subscribe(direct_channel(me), self._on_direct))
            self._unsubscribe.append(await self.bus.subscribe(BROADCAST, self._on_broadcast))
        except (StateUnavailableError, ConfigurationError) as exc:  # the request itself then gets the store's typed error
            self.stop()
            logger.warning("the replica bus is unreachable (%s): forwarding to this replica starts at a later request", exc.message)
            return
        self._as = me
        self.started = True

    def stop(self) -> None:
        """Leave the channels."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        self._as = None
        self.started = False

    # -- sending -----------------------------------------------------------------------
    async def forward_answer(self, response: JsonRpcResponse, session_id: str | None) -> bool:
        """Forward a client's answer that no local waiter took to the replica its id names.

        Returns:
            False when the id names no other replica, or that replica is not subscribed.
        Raises:
            StateUnavailableError: the bus cannot be reached (the client retries the POST).
        """
        origin = origin_of(response.id)
        if origin is None or session_id is None or origin == self.identity():
            return False
        message = {"k": "answer", "s": session_id, "id": response.id, "result": response.result, "error": response.error}
        return await self.bus.publish(direct_channel(origin), message) > 0

    async def forward_cancel(self, session_id: str, request_id: RequestId, reason: str | None) -> None:
        """Ask every other replica to cancel call ``request_id`` of the session."""
        await self._broadcast({"k": "cancel", "s": session_id, "r": request_id, "why": reason})

    async def session_ended(self, session_id: str) -> None:
        """Tell every other replica that the session was deleted."""
        await self._broadcast({"k": "end", "s": session_id})

    async def get_stream_opened(self, session_id: str, stream_id: str) -> None:
        """Tell every other replica that this one opened the session's GET stream ``stream_id``."""
        await self._broadcast({"k": "get", "s": session_id, "x": stream_id})

    async def _broadcast(self, message: dict[str, Any]) -> None:
        try:
            await self.bus.publish(BROADCAST, {**message, "o": self.identity()})
        except McpError as exc:  # the store already decided (deleted, cancelled); others catch up via it
            logger.warning("could not tell the other replicas (%s): %s", message["k"], exc)

    # -- receiving ---------------------------------------------------------------------
    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("a forwarded message failed: %r", task.exception())

    def _on_direct(self, message: dict[str, Any]) -> None:
        if message.get("k") != "answer" or self._pending is None:
            return
        request_id = message.get("id")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return
        response = JsonRpcResponse(request_id, message.get("result"), message.get("error"))
        if not self._pending.resolve(response, message.get("s")):
            logger.debug("a forwarded answer to %r found no waiter (late or duplicate)", request_id)

    def _on_broadcast(self, message: dict[str, Any]) -> None:
        if message.get("o") == self.identity():
            return
        if message.get("k") == "task":
            if self._tasks_handler is not None:
                self._tasks_handler(message)
            return
        session_id = message.get("s")
        if not isinstance(session_id, str):
            return
        kind = message.get("k")
        if kind == "cancel" and self._live is not None:
            live = self._live.get(session_id)
            signal = live.in_flight.get(message.get("r"))  # type: ignore[arg-type]
            if signal is not None:
                reason = message.get("why")
                signal.cancel(reason if isinstance(reason, str) else "cancelled by the client")
            self._live.release(session_id)
        elif kind == "end":
            if self._live is not None:
                self._live.end(session_id)
            if self._pending is not None:
                self._pending.close_scope(session_id)
            if self._streams is not None:
                self._spawn(self._streams.session_ended(session_id))
            if self._notifier is not None:
                self._spawn(self._notifier.session_ended(session_id))
        elif kind == "get" and self._streams is not None:
            stream_id = message.get("x")
            if isinstance(stream_id, str):
                self._spawn(self._streams.taken_elsewhere(session_id, stream_id))


_RELAYS: WeakSet[Relay] = WeakSet()


def _forked() -> None:
    """A forked child's relays start again under the child's own identity (``replica_id``)."""
    for relay in list(_RELAYS):
        relay.started = False


os.register_at_fork(after_in_child=_forked)
