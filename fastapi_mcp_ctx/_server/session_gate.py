"""The 2025 session lifecycle of the HTTP endpoint: ``initialize`` issuing ``Mcp-Session-Id``,
the session gate of every later request, the standalone ``GET`` stream and ``DELETE``.

Spec 2025-11-25 ``basic/transports`` §Session Management (400 without a session id, 404 for an
unknown one, DELETE ends it), §Listening for Messages from the Server (the GET stream),
§Protocol Version Header.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from .._replicas.relay import Relay
from .._transport.memory_sessions import MemorySessionStore
from .._transport.notifications import Notifier
from .._transport.pending import PendingRequests
from .._transport.resumable import ResumableStreams
from .._transport.sessions import (
    LiveSessions,
    OwnerQuotaExceeded,
    SessionRecord,
    SessionStore,
    check_client_metadata,
)
from .._transport.shutdown import ShutdownCoordinator
from .._transport.streams import Reply, StandaloneStream
from .._wire.envelope import HeaderMap, check_legacy_version, choose_era
from .._wire.jsonrpc import JsonRpcNotification, JsonRpcRequest, error_message
from ..auth import Principal
from ..errors import (
    McpError,
    MissingSessionError,
    NotAcceptableError,
    ProtocolVersionMismatchError,
    ServerShuttingDownError,
    SessionNotFoundError,
    StateUnavailableError,
    StreamConflictError,
)
from ..settings import McpSettings
from .deadline import store_work
from .dispatch import PRINCIPAL_SCOPE_KEY, Dispatcher
from .http import accepted
from .outcomes import json_reply

__all__ = ["SESSION_HEADER", "SessionGate", "error_response"]

SESSION_HEADER = "mcp-session-id"


def tenant_of(scope: Scope) -> str | None:
    principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
    return principal.tenant_id if principal is not None else "default"


def error_response(exc: McpError, request_id: Any = None, headers: dict[str, str] | None = None) -> Response:
    """``exc`` as a JSON-RPC error answer with its HTTP status and headers."""
    return json_reply(Reply(error_message(request_id, exc), exc.http_status, exc.headers), headers)


class SessionGate:
    """The 2025 sessions of one endpoint (the router's collaborators, shared with it)."""

    def __init__(
        self,
        *,
        settings: McpSettings,
        sessions: SessionStore,
        live: LiveSessions,
        dispatcher: Dispatcher,
        streams: ResumableStreams,
        notifier: Notifier,
        shutdown_coordinator: ShutdownCoordinator,
        pending: PendingRequests,
        relay: Relay,
    ) -> None:
        self.settings, self.sessions, self.live, self.dispatcher = settings, sessions, live, dispatcher
        self.streams, self.notifier, self.pending, self.relay = streams, notifier, pending, relay
        self.shutdown_coordinator = shutdown_coordinator
        self._remote_stores = bool(getattr(sessions, "shared", False) or getattr(notifier.bus, "shared", False))
        # the in-memory store's records, read inline (not when a subclass overrides ``get``)
        self._memory: MemorySessionStore | None = None
        self._records: dict[str, SessionRecord] = {}
        self._idle: float = 0.0
        if isinstance(sessions, MemorySessionStore) and type(sessions).get is MemorySessionStore.get:
            self._memory = sessions
            self._records, self._idle = sessions.fresh_view()

    def store_work(self, scope: Scope) -> Any:
        """The bound of a piece of this request's session-store / bus work: one deadline per
        request (``MCP_SESSION_STORE_DEADLINE_SECONDS``, ``_server/deadline.py``)."""
        return store_work(scope, self.settings.session_store_deadline_seconds, self._remote_stores)

    async def initialize(self, message: JsonRpcRequest, request_scope: Scope) -> Response:
        """``initialize``: a new session (stateful and auto modes), its id in ``Mcp-Session-Id``."""
        if self.shutdown_coordinator.shutting_down:  # new sessions go to another replica
            return error_response(ServerShuttingDownError(), message.id)
        result, version = self.dispatcher.initialize_result(message.params)
        headers: dict[str, str] = {}
        if self.settings.session_mode != "stateless":  # stateful and auto issue a session
            principal: Principal | None = request_scope.get(PRINCIPAL_SCOPE_KEY)
            owner = principal.owner_key if principal is not None else None
            try:
                check_client_metadata(message.params, self.settings.max_client_metadata_bytes)
            except McpError as exc:
                return error_response(exc, message.id)
            record = SessionRecord.from_initialize(message.params, version, owner)
            try:
                async with self.store_work(request_scope):
                    await self.sessions.create(record)
            except OwnerQuotaExceeded as exc:
                return error_response(StateUnavailableError(str(exc), retry_after=5, reason="too_many_sessions"), message.id)
            except OverflowError:
                return error_response(
                    StateUnavailableError("Too many open sessions", retry_after=5, reason="too_many_sessions"), message.id
                )
            headers[SESSION_HEADER] = record.id
        return json_reply(Reply({"jsonrpc": "2.0", "id": message.id, "result": result}), headers)

    def notification(self, message: JsonRpcNotification, session: SessionRecord | None) -> bool:
        """Act on a client notification; False for a cancellation of a call not running here."""
        if message.method == "notifications/cancelled" and session is not None:
            request_id = message.params.get("requestId")
            if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
                signal = self.live.get(session.id).in_flight.get(request_id)
                self.live.release(session.id)
                if signal is None:
                    return False
                reason = message.params.get("reason")
                signal.cancel(reason if isinstance(reason, str) else "cancelled by the client")
        return True

    async def session(self, headers: HeaderMap, scope: Scope) -> SessionRecord:
        """The caller's session named by ``Mcp-Session-Id``.

        Raises:
            MissingSessionError (400) / SessionNotFoundError (404: unknown, expired or another
                caller's) / ProtocolVersionMismatchError (400: a version the session did not negotiate).
        """
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            raise MissingSessionError()
        memory = self._memory
        if memory is not None:  # in memory: a live session costs no call, no store work to bound
            record = self._records.get(session_id)
            if record is None or (now := memory.clock()) - record.last_seen > self._idle:
                record = await self._memory_lookup(memory, session_id, scope)
            else:
                record.last_seen = now  # MemorySessionStore.fresh_view
        else:
            async with self.store_work(scope):
                record = await self.sessions.get(session_id)
                if record is None:
                    await self._expired(session_id)
            if record is None:
                raise SessionNotFoundError()
        principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
        if record.owner != (principal.owner_key if principal is not None else None):
            raise SessionNotFoundError()  # another caller's session: indistinguishable from unknown
        version = headers.get("mcp-protocol-version")
        if version is not None and version != record.protocol_version and version.strip() != record.protocol_version:  # served, but not in this session
            raise ProtocolVersionMismatchError(version.strip()[:64], record.protocol_version)
        return record

    async def _memory_lookup(self, memory: MemorySessionStore, session_id: str, scope: Scope) -> SessionRecord:
        """An id the inline look-up of :meth:`session` did not find live (unknown, or idle past
        its time unless pinned): the store's own look-up.

        Raises:
            SessionNotFoundError: unknown or expired (its in-process companions go too).
        """
        record = memory.lookup(session_id)
        if record is None:
            async with self.store_work(scope):
                await self._expired(session_id)
            raise SessionNotFoundError()
        return record

    async def _expired(self, session_id: str) -> None:
        """An unknown or expired session: its in-process companions go too."""
        self.live.end(session_id)
        await self.notifier.session_ended(session_id)
        self.pending.close_scope(session_id)
        await self.streams.session_ended(session_id)

    def _reject_modern_header(self, headers: HeaderMap) -> Response | None:
        """GET/DELETE: the 2026 era has neither (405), nor stateless mode (no stream, no session:
        405); a 2025 request must name a served version (400)."""
        if choose_era(headers, None) == "modern" or self.settings.session_mode == "stateless":
            return Response(status_code=405, headers={"Allow": "POST"})
        check_legacy_version(headers)
        return None

    async def get(self, request: Request, headers: HeaderMap) -> Response:
        """``GET``: the session's standalone SSE stream (resumable with ``Last-Event-ID``)."""
        rejected = self._reject_modern_header(headers)
        if rejected is not None:
            return rejected
        if not accepted(headers)[1] or headers.get("accept") is None:
            raise NotAcceptableError("Not Acceptable: Client must accept text/event-stream")
        session = await self.session(headers, request.scope)
        if self.streams.serves("legacy", session):  # resumable: Last-Event-ID, stored events
            async with self.store_work(request.scope):
                return await self.streams.get(headers, session, tenant_of(request.scope))
        if self.shutdown_coordinator.shutting_down:
            raise ServerShuttingDownError()
        live = self.live.get(session.id)
        messages = live.open_standalone(self.settings.stream_buffer_size)
        if messages is None or live.standalone_send is None:
            return error_response(StreamConflictError())
        detach = await self.notifier.attach_get_stream(tenant_of(request.scope), session.id, live.standalone_send, live.close_standalone)

        def closed() -> None:
            detach()
            live.close_standalone()
            session.last_seen = time.time()  # the idle timer restarts when the stream ends
            self.live.release(session.id)

        return StandaloneStream(messages, closed, headers={SESSION_HEADER: session.id}, keepalive_seconds=self.settings.keepalive_seconds)

    async def delete(self, request: Request, headers: HeaderMap) -> Response:
        """``DELETE``: end the session here and on every replica."""
        rejected = self._reject_modern_header(headers)
        if rejected is not None:
            return rejected
        session = await self.session(headers, request.scope)
        async with self.store_work(request.scope):
            await self.sessions.delete(session.id)
        self.live.end(session.id)
        async with self.store_work(request.scope):
            await self.notifier.session_ended(session.id)
            self.pending.close_scope(session.id)
            await self.streams.session_ended(session.id)
            await self.relay.session_ended(session.id)  # the other replicas end theirs
        return Response(status_code=200)
