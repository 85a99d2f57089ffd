"""Resumable 2025 SSE streams: a call's POST stream, the session's GET stream, and resumption
by ``GET`` + ``Last-Event-ID`` (spec 2025-11-25 ``basic/transports`` §Sending Messages item 6,
§Listening for Messages, §Resumability and Redelivery; known faults B15, B16, B49).

A 2025 request of a session is resumable when ``MCP_HTTP_RESUMABILITY`` is on (the default):

- its SSE events carry ids (``<stream id>:<seq>``) and every event is stored in the
  :class:`~._transport.events.EventStore` first, whether a connection is attached or not, the
  final response included; a connection only tails the store (``_transport.sse``);
- for clients at 2025-11-25 or later (by ``mcp_types.version`` order, never in the 2026 era)
  each stream opens with a priming event (id, ``retry``, empty ``data``), and the server may
  close the *connection* (``ctx.close_sse_stream()``, shutdown) after a ``retry`` hint; older
  clients get ids but no priming and are never closed early (B49);
- a POST answered before any notification is plain JSON: no stream, no priming;
- a client that disconnects does not cancel the call (the spec: disconnection SHOULD NOT be
  read as cancellation); the call runs on, its events are stored for a resume;
- ``GET`` with ``Last-Event-ID`` replays what followed that event on that stream only, then
  continues live while the stream produces; an ended GET stream continues on the session's
  current one. A malformed id, or one no stream of this session has, is ``400 -32600``.

A call's own response is ``_transport.resumable_call``; the GET stream's log and response are
``_transport.get_stream``. The session's GET stream outlives its connections: notifications
are stored while no connection is attached, until the session ends or no connection came back
for ``MCP_EVENT_RETENTION_SECONDS``.

Streams that outlive their replica (several replicas, issue 24):

- a call's stream carries a lease of its running replica (``MCP_SESSION_LEASE_SECONDS``,
  renewed while the call runs); should that replica die, a reader of the stream (a resume on
  any replica) ends it, once the lease lapsed, with the call's ``call_lost`` error;
- what is sent to the session's GET stream is recorded whether or not a replica holds it
  (``_transport.notifications``); a resume of a dead replica's GET stream replays it;
- only a GET stream's connection holds the session's GET lease: a plain GET, or a resume of
  a GET stream (it takes the stream over); a resume of a call's stream never touches it;
- a GET that fails on the way (503: the store or the bus unreachable) gives back everything it
  claimed (this process's slot, the lease, the stream, the bus subscription), so its retry
  gets the stream, never 409.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
from starlette.responses import Response

from .._wire.envelope import HeaderMap
from .._wire.jsonrpc import dumps
from .._wire.versions import HANDSHAKE_PROTOCOL_VERSIONS, is_version_at_least
from ..errors import InvalidEventIdError, McpError, ServerShuttingDownError, StreamConflictError
from ..settings import McpSettings
from .event_ids import StreamKey, new_stream_id, parse_event_id
from .events import EventStore, UnknownStreamError
from .get_stream import GetLog as _GetLog
from .get_stream import GetResponse as _GetResponse
from .leases import LocalLeases, StreamLeases
from .notifications import BROADCAST_MARK, Notifier, tenant_scope
from .sessions import SessionRecord
from .shutdown import ShutdownCoordinator
from .sse import Attachments, Connection, closer, sse_headers

__all__ = ["ResumableStreams", "sse_headers"]

PRIMING_VERSION: Final = "2025-11-25"
PRIMED: Final = frozenset(v for v in HANDSHAKE_PROTOCOL_VERSIONS if is_version_at_least(v, PRIMING_VERSION))
"""The handshake versions whose streams are primed (compared once, at import, not per call)."""
_RETIRED_MAX: Final = 10_000
logger = logging.getLogger("fastapi_mcp_ctx")


class ResumableStreams:
    """The resumable streams of one router (see the module docstring).

    Args:
        store: where events are kept.
        settings: retention, ``retry`` and keep-alive settings.
        coordinator: the router's shutdown coordinator (every attached connection registers).
        notifier: feeds the session GET streams from the bus.
        leases: who holds each session's GET stream across replicas (default: this process only).
        announce: ``announce(session_id, stream_id)`` tells the other replicas that this one
            opened the session's GET stream (theirs retire: ``taken_elsewhere``).
    """

    def __init__(
        self,
        store: EventStore,
        settings: McpSettings,
        coordinator: ShutdownCoordinator,
        notifier: Notifier,
        leases: StreamLeases | None = None,
        announce: Callable[[str, str], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.leases: StreamLeases = leases or LocalLeases()
        self.announce = announce
        self.settings = settings
        self.coordinator = coordinator
        self.notifier = notifier
        self.attachments = Attachments(lambda connection: coordinator.add_stream(closer(connection)))
        self._gets: dict[str, _GetLog] = {}
        self._retired: dict[StreamKey, None] = {}
        self._posts: dict[str, set[StreamKey]] = {}  # session id -> streams of calls still running
        self._ended: set[str] = set()  # sessions ended while calls still ran
        if self.leases.shared and settings.http_resumability:
            # several replicas with resumable GET streams: what is sent to a session's GET stream
            # goes into the shared store, whoever holds the stream (never only to a bus holder)
            notifier.recorder = store

    # -- policy -------------------------------------------------------------------------------
    def serves(self, era: str, session: SessionRecord | None, loop: asyncio.AbstractEventLoop | None = None) -> bool:
        """Whether a request of ``era`` on ``session`` gets resumable streams (on asyncio: the
        GET streams' storage runs in tasks of their own; other event loops get plain streams).
        ``loop``: the request's asyncio loop when the caller has it (no look-up)."""
        if not (self.settings.http_resumability and era == "legacy" and session is not None):
            return False
        if loop is not None:
            return True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def retry_ms(self, version: str) -> int | None:
        """The ``retry`` announced to a client at ``version``: None before 2025-11-25 (no priming,
        no server-side close) and outside the handshake era."""
        if version in PRIMED:
            return self.settings.sse_retry_ms
        return None

    # -- GET ----------------------------------------------------------------------------------
    async def get(self, request_headers: HeaderMap, session: SessionRecord, tenant_id: str | None) -> Response:
        """Serve a 2025 ``GET``: resume the stream named by ``Last-Event-ID``, or open the
        session's GET stream.

        Raises:
            ServerShuttingDownError: shutting down (503, ``Retry-After``).
            InvalidEventIdError: a malformed ``Last-Event-ID``, or one no stream of this session has.
            StreamConflictError: a GET stream of this session is open already (409).
        """
        if self.coordinator.shutting_down:
            raise ServerShuttingDownError()
        headers = {"mcp-session-id": session.id}
        retry_ms = self.retry_ms(session.protocol_version)
        raw = request_headers.get("last-event-id")
        if raw is None:
            current = self._gets.get(session.id)
            if current is not None and current.holder is not None:
                raise StreamConflictError()
            response = _GetResponse(self, session, tenant_id, retry_ms, headers)
            try:
                if not await self.leases.acquire(session.id, response.token):
                    raise StreamConflictError()  # held by a connection on another replica
                response.log = await self.open_get_stream(session, tenant_id, response)
            except BaseException:  # a failed open keeps no claim (issue 24 item 6); release is token-guarded
                with anyio.CancelScope(shield=True), contextlib.suppress(McpError):
                    await self.leases.release(session.id, response.token)
                raise
            return response
        stream_id, seq = parse_event_id(raw)
        key = StreamKey(session.id, stream_id)
        try:
            await self.store.read(key, seq)
        except UnknownStreamError:
            raise InvalidEventIdError(
                "Unknown Last-Event-ID: no stream of this session has that event (expired, or never sent here)"
            ) from None
        response = _GetResponse(self, session, tenant_id, retry_ms, headers, resume=(key, seq))
        current = self._gets.get(session.id)
        if current is not None and current.key == key:
            if self.leases.shared:
                await self.leases.acquire(session.id, response.token, force=True)  # a resume takes the stream over
            response.log = current
            current.holder = response  # a resume takes the GET stream over (claimed once nothing can fail)
            return response
        retired = self.retired(key)  # this replica's ended GET stream: it continues on a new one
        takeover = not retired and await self.leases.is_get_stream(session.id, stream_id)
        if not (retired or takeover):
            # A call's stream: its resume leaves the session's GET stream and its lease alone
            # (taking the lease, then releasing it, would let a second GET stream in).
            response.leased = False
            return response
        if takeover:
            # Another replica's GET stream (that replica may be dead): what was sent to the
            # session while nobody held it is recorded into it first (issue 24 item 5), then it
            # is replayed to its end here and continues on a GET stream of this replica (theirs retires).
            # The stream it continues on is opened now, before the 200 and the replay, so
            # nothing sent to the session meanwhile is lost (it waits in the new stream's log);
            # the step that makes it the session's ends theirs. The lease is taken first: once
            # the new stream is the session's, nothing can fail any more.
            if self.leases.shared:
                await self.leases.acquire(session.id, response.token, force=True)  # a resume takes the stream over
            try:
                response.successor = await self.open_get_stream(session, tenant_id, response, follows=key)
            except BaseException:  # a failed resume keeps nothing (issue 24 item 6); release is token-guarded
                with anyio.CancelScope(shield=True), contextlib.suppress(McpError):
                    await self.leases.release(session.id, response.token)
                raise
            return response
        if self.leases.shared:
            await self.leases.acquire(session.id, response.token, force=True)  # a resume takes the stream over
        return response

    async def open_get_stream(
        self, session: SessionRecord, tenant_id: str | None, holder: object, *, follows: StreamKey | None = None
    ) -> _GetLog:
        """Start a new GET stream for ``session`` (the previous one retires), held by ``holder``;
        ``follows``: another replica's GET stream it continues (it takes what that one missed,
        then ends: ``EventStore.open``).

        A failure on the way (the store or the bus unreachable: ``StateUnavailableError``, 503)
        gives back everything claimed so far (this process's slot, the stream, the bus
        subscription, the pump), so a retry after recovery opens the stream, never 409 (issue 24
        item 6)."""
        previous = self._gets.get(session.id)
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](self.settings.stream_buffer_size)
        log = _GetLog(StreamKey(session.id, new_stream_id()), send, receive, holder=holder)
        self._gets[session.id] = log  # claimed before any await: a concurrent GET gets 409
        if previous is not None:
            previous.send.close()
        tag = tenant_scope(tenant_id)
        try:
            # Opened first, made the session's GET stream last (promote): until then what is sent
            # to the session goes to the stream it had (``follows``: the one a resume replays),
            # so an opening that fails half-way (a failover) strands nothing in a stream no
            # client was given.
            await self.store.open(log.key, get_stream=tag, current=False)
            if self.retry_ms(session.protocol_version) is not None:
                await self.store.append(log.key, None)  # the priming event

            def on_bus_close() -> None:  # the notifier: this stream fell behind, or it shuts down
                if self.coordinator.shutting_down:
                    connection = self.attachments.get(log.key)
                    if isinstance(connection, Connection) and not connection.close():
                        connection.drop("dropped")
                else:
                    log.send.close()

            log.release_bus = await self.notifier.attach_get_stream(
                tenant_id, session.id, send, on_bus_close, recorded=self.notifier.recorder is not None
            )
            task = asyncio.get_running_loop().create_task(self._pump(log))
            log.tasks.add(task)
            task.add_done_callback(log.tasks.discard)
            # retired meanwhile (the session ended, another GET took its stream), or ended in the
            # store: never the session's
            if log.retired or not await self.store.promote(log.key, get_stream=tag, follows=follows) or log.retired:
                raise StreamConflictError()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._abandon(log)
            raise
        # The session's stream from here: a store failure below keeps it (ending it would strand
        # what was recorded into it since the promotion); only a cancellation gives it up.
        try:
            if self.notifier.recorder is not None:  # list changes recorded before the bus subscription took
                await self.store.catch_up(log.key)
            await self.leases.note_get_stream(session.id, log.key.stream_id)
            if self.announce is not None:
                await self.announce(session.id, log.key.stream_id)
        except McpError as exc:
            logger.warning("a new GET stream is the session's, but a step after failed (it is kept): %s", exc)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._abandon(log)
            raise
        return log

    async def _abandon(self, log: _GetLog) -> None:
        """Undo a GET stream whose opening failed: nothing of it stays claimed (issue 24 item 6),
        also when it was retired before its opening finished (what the opening made after the
        retirement is given back: the bus subscription, the stream's keys; the session's, when
        it ended)."""
        log.holder = None
        for task in tuple(log.tasks):
            task.cancel()
        if not log.retired:
            await self._retire(log)
            return
        if log.release_bus is not None:
            log.release_bus()
        session_id = log.key.session_id
        with contextlib.suppress(McpError):
            if log.dropped and not self._posts.get(session_id):  # else the last call's end drops it
                await self.store.drop_session(session_id)
            else:
                await self.store.end(log.key)

    async def taken_elsewhere(self, session_id: str, stream_id: str) -> None:
        """Another replica opened GET stream ``stream_id`` of the session: this replica's
        (another stream of it) retires, as a newer local one would replace it."""
        log = self._gets.get(session_id)
        if log is not None and log.key.stream_id != stream_id:
            await self._retire(log)

    def get_stream_attached(self, session_id: str) -> bool:
        """True while a connection holds ``session_id``'s GET stream (it keeps the session alive)."""
        log = self._gets.get(session_id)
        return log is not None and log.holder is not None

    def release_get_stream(self, log: _GetLog, holder: object) -> None:
        """``holder``'s connection ended: the stream stays, stored, for a resume."""
        if log.holder is holder:
            log.holder = None
            log.detached_at = anyio.current_time()

    async def _pump(self, log: _GetLog) -> None:
        retention = self.settings.event_retention_seconds
        try:
            while True:
                message: dict[str, Any] | None = None
                with anyio.move_on_after(retention / 2):
                    try:
                        message = await log.receive.receive()
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        return
                if message is not None:
                    try:
                        if message.get(BROADCAST_MARK, 0):
                            # a list change: taken from the broadcast log with every one before it
                            # the stream has not taken (the bus may deliver them out of order)
                            await self.store.catch_up(log.key)
                        else:
                            await self.store.append(log.key, dumps(message))
                    except McpError as exc:  # the store is unreachable: this notification is lost
                        logger.warning("a notification for a GET stream could not be stored: %s", exc)
                elif log.holder is None and log.detached_at is not None and anyio.current_time() - log.detached_at >= retention:
                    return  # nobody came back: stop storing for this session
        except UnknownStreamError:
            return
        finally:
            with anyio.CancelScope(shield=True):
                await self._retire(log)

    async def _retire(self, log: _GetLog) -> None:
        if log.retired:
            return
        log.retired = True
        if log.release_bus is not None:
            log.release_bus()
        log.send.close()
        if self._gets.get(log.key.session_id) is log:
            del self._gets[log.key.session_id]
        self._retired[log.key] = None
        while len(self._retired) > _RETIRED_MAX:
            del self._retired[next(iter(self._retired))]
        try:
            await self.store.end(log.key)
        except McpError as exc:  # unreachable: the stream's keys expire by themselves
            logger.warning("a GET stream could not be ended in the event store: %s", exc)

    def retired(self, key: StreamKey) -> bool:
        """True when ``key`` was a GET stream that has ended (a resume continues on the current one)."""
        return key in self._retired

    # -- closing --------------------------------------------------------------------------------
    async def close_connection(self, key: StreamKey) -> bool:
        """Close the connection attached to ``key`` (not the stream), after a ``retry`` hint."""
        connection = self.attachments.get(key)
        return connection is not None and await connection.aclose()

    async def close_get_connection(self, session_id: str) -> bool:
        """Close the connection of ``session_id``'s GET stream, after a ``retry`` hint."""
        log = self._gets.get(session_id)
        return log is not None and await self.close_connection(log.key)

    async def session_ended(self, session_id: str) -> None:
        """Forget an ended session: its GET stream and GET connections now; its stored events
        once its calls (cancelled by the session's end) have sent their last message."""
        log = self._gets.get(session_id)
        if log is not None:
            log.dropped = True
            await self._retire(log)
        for connection in self.attachments.connections(session_id):
            if connection.kind == "get":
                connection.drop("dropped")
        for key in [k for k in self._retired if k.session_id == session_id]:
            del self._retired[key]
        if self._posts.get(session_id):
            self._ended.add(session_id)
        else:
            await self.store.drop_session(session_id)

    def call_stream_started(self, key: StreamKey) -> None:
        """A call's stream began (its session's events are kept until it finishes)."""
        self._posts.setdefault(key.session_id, set()).add(key)

    async def call_stream_finished(self, key: StreamKey) -> None:
        """A call's stream has its last event; a session that ended meanwhile is forgotten now."""
        running = self._posts.get(key.session_id)
        if running is not None:
            running.discard(key)
            if not running:
                del self._posts[key.session_id]
                if key.session_id in self._ended:
                    self._ended.discard(key.session_id)
                    connection = self.attachments.get(key)
                    if connection is not None:  # let it deliver the last message first
                        with anyio.move_on_after(5.0):
                            await connection.wait_finished()
                    await self.store.drop_session(key.session_id)

    async def aclose(self) -> None:
        """End every GET stream of this process (the router closes)."""
        for log in tuple(self._gets.values()):
            await self._retire(log)
            for task in tuple(log.tasks):
                await task
