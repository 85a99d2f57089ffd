"""The Streamable HTTP exchange of both eras on one path: POST, GET and DELETE.

``McpRouter`` (registration and the public methods) mounts one :class:`McpEndpoint` as its
route. The endpoint runs the transport checks (Host/Origin, repeated headers, Content-Type,
Accept, the bounded body read), ``authenticate=``, picks the era (``_envelope.choose_era``,
DESIGN.md decision 2), gates 2025 sessions (``initialize``, ``Mcp-Session-Id``, the GET stream,
DELETE) and hands each request to the :class:`~fastapi_mcp_ctx._dispatch.Dispatcher`.

Spec: 2025-11-25 ``basic/transports`` (Streamable HTTP, sessions) and 2026-07-28
``basic/transports/streamable-http`` (single exchange, required headers).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Scope

from .._authn import AuthOutcome, resolve_principal
from .._batch import starts_batch
from .._dispatch import JSON_OK_SCOPE_KEY, PRINCIPAL_SCOPE_KEY, Dispatcher
from .._envelope import (
    HeaderMap,
    RequestEnvelope,
    check_legacy_version,
    choose_era,
    header_map,
    read_legacy_envelope,
    read_modern_envelope,
)
from .._gate import build_gate
from .._gcfreeze import freeze_startup_objects
from .._http import BODY_SCOPE_KEY, accepted, read_body, refuse_content_coding, reject_repeated
from .._jsonrpc import JsonRpcNotification, JsonRpcRequest, JsonRpcResponse, error_message, parse_message, request_id_of
from .._logging import install_default_handler
from .._sealing import announce_process_key
from .._outcomes import error_reply, json_reply
from .._replicas.deadline import store_work
from .._replicas.relay import Relay
from .._resource_metadata import challenge, ensure_root_routes, metadata_routes
from .._security import TransportSecurity, is_loopback_host, loopback_security
from .._sessions import LiveSessions, OwnerQuotaExceeded, SessionRecord, SessionStore, check_client_metadata
from .._streams import Reply, StandaloneStream
from .._transport.notifications import Notifier
from .._transport.pending import PendingRequests
from .._transport.resumable import ResumableStreams
from .._transport.shutdown import ShutdownCoordinator
from ..auth import Principal
from ..errors import (
    AuthenticationError,
    InvalidRequestError,
    MalformedAnswerError,
    McpError,
    MissingSessionError,
    NotAcceptableError,
    ProtocolVersionMismatchError,
    ServerShuttingDownError,
    SessionNotFoundError,
    StateUnavailableError,
    StreamConflictError,
    UnsupportedMediaTypeError,
    UnsupportedVersionError,
)
from ..settings import McpSettings
from .batch import BatchHooks, serve_batch

__all__ = ["McpEndpoint"]

logger = logging.getLogger("fastapi_mcp_ctx")
_SESSION_HEADER = "mcp-session-id"


def _tenant_of(scope: Scope) -> str | None:
    principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
    return principal.tenant_id if principal is not None else "default"


def _error_response(exc: McpError, request_id: Any = None, headers: dict[str, str] | None = None) -> Response:
    return json_reply(Reply(error_message(request_id, exc), exc.http_status, exc.headers), headers)



def _body_request_id(body: bytes | None) -> Any:
    """The id of the JSON-RPC request in ``body``, or None (no body, not a request, unparsable)."""
    if not body:
        return None
    try:
        message = parse_message(body)
    except McpError:
        return None
    return message.id if isinstance(message, JsonRpcRequest) else None


class McpEndpoint:
    """The HTTP exchange of one ``McpRouter`` (its route's endpoint is :meth:`handle`).

    Args:
        router: the ``McpRouter`` this endpoint serves (found again from the route by
            ``_discovery`` and ``testing``; never called from here).
        settings / sessions / live / dispatcher / streams / notifier / shutdown_coordinator /
            pending: the router's collaborators, shared with it.
        authenticate: the dependant of ``McpRouter(authenticate=...)``, or None.
    """

    def __init__(
        self,
        router: object,
        *,
        settings: McpSettings,
        sessions: SessionStore,
        live: LiveSessions,
        dispatcher: Dispatcher,
        streams: ResumableStreams,
        notifier: Notifier,
        shutdown_coordinator: ShutdownCoordinator,
        pending: PendingRequests,
        authenticate: Any,
        relay: Relay | None = None,
    ) -> None:
        self.router = router
        self.settings = settings
        self.sessions = sessions
        self.live = live
        self.dispatcher = dispatcher
        self.streams = streams
        self.notifier = notifier
        self.shutdown_coordinator = shutdown_coordinator
        self.pending = pending
        self._authenticate = authenticate
        self.relay = relay if relay is not None else Relay(notifier.bus)  # forwarding between replicas
        self._loopback = loopback_security()
        self._log_checked = False
        self._configured_security = self._security_from_settings()
        self._remote_stores = bool(getattr(sessions, "shared", False) or getattr(notifier.bus, "shared", False))
        registry, features = dispatcher.registry, dispatcher.features

        def scopes() -> set[str]:  # what a 401 challenge and the metadata advertise: tools, resources, prompts
            return registry.scopes() | (features.scopes() if features is not None else set())

        self.gate = build_gate(settings, authenticate is not None, scopes)  # MCP_AUTH_MODE (None: nothing to run)
        self.metadata_routes = metadata_routes(settings, scopes)  # RFC 9728, served at the app's root

    async def handle(self, request: Request) -> Response:
        """The route's endpoint: one MCP HTTP request of either era."""
        return await self._endpoint(request)

    def _store_work(self, scope: Scope) -> Any:
        """The bound of a piece of this request's session-store / bus work: one deadline per
        request (``MCP_SESSION_STORE_DEADLINE_SECONDS``, ``_replicas/deadline.py``)."""
        return store_work(scope, self.settings.session_store_deadline_seconds, self._remote_stores)

    # -- transport security --------------------------------------------------------------
    def _security_from_settings(self) -> TransportSecurity | None:
        s = self.settings
        if s.dns_rebinding_protection is False:
            return TransportSecurity(enabled=False)
        if s.allowed_hosts is not None or s.allowed_origins is not None:
            base = self._loopback
            return TransportSecurity(
                enabled=True,
                allowed_hosts=(*base.allowed_hosts, *(h.lower() for h in s.allowed_hosts or ())),
                allowed_origins=(*base.allowed_origins, *(o.lower() for o in s.allowed_origins or ())),
                any_loopback_ip=True,
            )
        if s.dns_rebinding_protection is True:
            return self._loopback
        return None

    def _check_transport(self, request: Request, headers: HeaderMap) -> None:
        security = self._configured_security
        if security is None:
            server = request.scope.get("server")
            if not server or not is_loopback_host(str(server[0])):
                return
            security = self._loopback
        security.check(headers)

    # -- HTTP ----------------------------------------------------------------------------
    async def _endpoint(self, request: Request) -> Response:
        if not self._log_checked:  # at first use: by now the application configured its logging, or not
            self._log_checked = True
            if self.settings.gc_freeze:
                freeze_startup_objects()
            install_default_handler(self.settings.log_level)
            announce_process_key(self.settings)
            ensure_root_routes(request.app, self.metadata_routes)
        outcome: AuthOutcome | None = None
        self.shutdown_coordinator.first_use()
        if not self.relay.started:  # this replica's bus channels, at first use (after any fork)
            try:
                async with self._store_work(request.scope):
                    await self.relay.start()
            except StateUnavailableError:  # the deadline passed: forwarding starts at a later request
                logger.warning("the replica bus did not answer within MCP_SESSION_STORE_DEADLINE_SECONDS")
        method = request.scope["method"]
        try:
            headers = header_map(request.scope["headers"])
            if headers.repeated & {"host", "origin"}:
                reject_repeated(headers.repeated & {"host", "origin"})
            self._check_transport(request, headers)
            if headers.repeated and method != "POST":
                reject_repeated(headers.repeated)
            if method == "POST":  # read once, bounded; dependencies and tools get it replayed
                request.scope[BODY_SCOPE_KEY] = await read_body(
                    request, headers, self.settings.max_body_bytes, self.settings.body_timeout_seconds
                )
            if self._authenticate is not None or self.gate is not None:
                try:
                    if self._authenticate is None:  # the gate: MCP_AUTH_MODE=jwt/oauth, or unset (local only)
                        principal = await self.gate.admit(request, headers)  # pyright: ignore[reportOptionalMemberAccess]
                    else:
                        outcome = await resolve_principal(self._authenticate, request)
                        principal = outcome.principal
                        if principal is None:
                            raise AuthenticationError("Unauthorized", headers={"WWW-Authenticate": challenge(self.settings)})
                except McpError as exc:  # the body was read: the refusal echoes its id
                    if request_id_of(exc) is None:
                        exc.request_id = _body_request_id(request.scope.get(BODY_SCOPE_KEY))  # type: ignore[attr-defined]
                    raise
                if principal is not None:
                    request.scope[PRINCIPAL_SCOPE_KEY] = principal
            if method == "POST":
                response = await self._post(request, headers)
            elif method == "GET":
                response = await self._get(request, headers)
            else:
                response = await self._delete(request, headers)
        except McpError as exc:
            response = _error_response(exc, request_id_of(exc))
        except ClientDisconnect:
            return Response(status_code=400)
        if outcome is not None:
            outcome.apply(response)
        return response

    async def _post(self, request: Request, headers: HeaderMap) -> Response:
        content_type = headers.get("content-type", "")
        if not content_type.split(";", 1)[0].strip().lower() == "application/json":
            raise UnsupportedMediaTypeError()
        if "content-encoding" in headers:  # RFC 9110 §15.5.16: a coding this server does not decode
            refuse_content_coding(request.scope["headers"])
        json_ok, sse_allowed = accepted(headers)
        request.scope[JSON_OK_SCOPE_KEY] = json_ok
        if not (json_ok or sse_allowed):
            raise NotAcceptableError()
        if starts_batch(request.scope[BODY_SCOPE_KEY]):  # an array: served in 2025-03-26 sessions only (batch.py)
            return await serve_batch(self._batch_hooks(request.scope), request, headers, sse_allowed)
        try:
            message = parse_message(request.scope[BODY_SCOPE_KEY])
        except MalformedAnswerError as exc:
            await self._fail_waiter(exc, request, headers)
            raise
        if headers.repeated:
            try:
                reject_repeated(headers.repeated)
            except McpError as exc:
                exc.request_id = message.id if isinstance(message, JsonRpcRequest) else None  # type: ignore[attr-defined]
                raise
        params = message.params if not isinstance(message, JsonRpcResponse) else None
        era = choose_era(headers, params)
        if era == "modern":
            return await self._post_modern(message, request, headers, sse_allowed)
        return await self._post_legacy(message, request, headers, sse_allowed)

    async def _fail_waiter(self, exc: MalformedAnswerError, request: Request, headers: HeaderMap) -> None:
        """A malformed answer of a session's client fails the request waiting for its id at once."""
        if _SESSION_HEADER not in headers:
            return
        try:
            session = await self._session(headers, request.scope)
        except McpError:
            return  # unknown or foreign session: nothing of it waits here
        failed = JsonRpcResponse(exc.answer_id, None, {"code": -32600, "message": f"The client's answer was malformed: {exc.message}"})
        try:
            async with self._store_work(request.scope):
                await self._deliver_answer(failed, session.id)
        except StateUnavailableError:
            pass  # the malformed answer is refused anyway (400); its waiter times out

    async def _deliver_answer(self, answer: JsonRpcResponse, scope: str | None) -> bool:
        """Hand a client's answer to the request waiting for it here, or forward it to the
        replica its id names; False when nobody waits for it."""
        return self.pending.resolve(answer, scope) or await self.relay.forward_answer(answer, scope)

    async def _post_modern(
        self,
        message: JsonRpcRequest | JsonRpcNotification | JsonRpcResponse,
        request: Request,
        headers: HeaderMap,
        sse_allowed: bool,
    ) -> Response:
        if isinstance(message, JsonRpcResponse):
            raise InvalidRequestError("Clients must not POST responses in the 2026-07-28 era")
        if isinstance(message, JsonRpcNotification):
            version = headers.get("mcp-protocol-version")
            if version is not None and version.strip() not in MODERN_PROTOCOL_VERSIONS:
                raise UnsupportedVersionError(version.strip(), list(MODERN_PROTOCOL_VERSIONS))
            return Response(status_code=202)
        if message.method == "subscriptions/listen" and not sse_allowed:  # checklist §4.5 step 7
            error = NotAcceptableError("Not Acceptable: subscriptions/listen answers with text/event-stream; accept it")
            return json_reply(error_reply(message.id, error, "modern"))
        try:
            envelope = read_modern_envelope(headers, message.method, message.params)
        except McpError as exc:
            return json_reply(error_reply(message.id, exc, "modern"))
        return await self.dispatcher.dispatch(message, envelope, request, None, {}, sse_allowed)

    async def _post_legacy(
        self,
        message: JsonRpcRequest | JsonRpcNotification | JsonRpcResponse,
        request: Request,
        request_headers: HeaderMap,
        sse_allowed: bool,
    ) -> Response:
        mode = self.settings.session_mode  # auto: a session when the request names one, else none
        in_session = mode == "stateful" or (mode == "auto" and _SESSION_HEADER in request_headers)
        try:
            check_legacy_version(request_headers)
            if isinstance(message, JsonRpcRequest) and message.method == "initialize":
                return await self._initialize(message, request.scope)
            session = await self._session(request_headers, request.scope) if in_session else None
        except McpError as exc:
            exc.request_id = message.id if isinstance(message, JsonRpcRequest) else None  # type: ignore[attr-defined]
            raise
        headers = {_SESSION_HEADER: session.id} if session is not None else {}
        if isinstance(message, JsonRpcResponse):  # an answer to ctx.send_request, matched in its session
            scope = session.id if session is not None else None
            async with self._store_work(request.scope):
                delivered = await self._deliver_answer(message, scope)
            if not delivered:
                logger.debug("ignored a client response to an unknown request id %r", message.id)
            return Response(status_code=202, headers=headers)
        if isinstance(message, JsonRpcNotification):
            if not self._legacy_notification(message, session) and session is not None:  # the call may run elsewhere
                async with self._store_work(request.scope):
                    await self.relay.forward_cancel(session.id, message.params["requestId"], message.params.get("reason"))
            return Response(status_code=202, headers=headers)
        header_version = request_headers.get("mcp-protocol-version")
        if session is not None:
            version = session.protocol_version
        else:
            version = header_version.strip() if header_version else "2025-03-26"
        try:
            envelope: RequestEnvelope = read_legacy_envelope(request_headers, message.params, version)
        except McpError as exc:  # a bad _meta (progressToken...): the request's own error, its id echoed
            return json_reply(error_reply(message.id, exc, "legacy"), headers)
        if session is not None:
            envelope.client_capabilities = session.client_capabilities
            envelope.client_info = session.client_info
        return await self.dispatcher.dispatch(message, envelope, request, session, headers, sse_allowed)

    async def _initialize(self, message: JsonRpcRequest, request_scope: Scope) -> Response:
        if self.shutdown_coordinator.shutting_down:  # new sessions go to another replica
            return _error_response(ServerShuttingDownError(), message.id)
        result, version = self.dispatcher.initialize_result(message.params)
        headers: dict[str, str] = {}
        if self.settings.session_mode != "stateless":  # stateful and auto issue a session
            principal: Principal | None = request_scope.get(PRINCIPAL_SCOPE_KEY)
            owner = principal.owner_key if principal is not None else None
            try:
                check_client_metadata(message.params, self.settings.max_client_metadata_bytes)
            except McpError as exc:
                return _error_response(exc, message.id)
            record = SessionRecord.from_initialize(message.params, version, owner)
            try:
                async with self._store_work(request_scope):
                    await self.sessions.create(record)
            except OwnerQuotaExceeded as exc:
                return _error_response(StateUnavailableError(str(exc), retry_after=5, reason="too_many_sessions"), message.id)
            except OverflowError:
                return _error_response(
                    StateUnavailableError("Too many open sessions", retry_after=5, reason="too_many_sessions"), message.id
                )
            headers[_SESSION_HEADER] = record.id
        return json_reply(Reply({"jsonrpc": "2.0", "id": message.id, "result": result}), headers)

    def _legacy_notification(self, message: JsonRpcNotification, session: SessionRecord | None) -> bool:
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

    async def _session(self, headers: HeaderMap, scope: Scope) -> SessionRecord:
        session_id = headers.get(_SESSION_HEADER)
        if session_id is None:
            raise MissingSessionError()
        async with self._store_work(scope):
            record = await self.sessions.get(session_id)
            if record is None:
                self.live.end(session_id)  # expired: its in-process companions go too
                await self.notifier.session_ended(session_id)
                self.pending.close_scope(session_id)
                await self.streams.session_ended(session_id)
        if record is None:
            raise SessionNotFoundError()
        principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
        if record.owner != (principal.owner_key if principal is not None else None):
            raise SessionNotFoundError()  # another caller's session: indistinguishable from unknown
        version = headers.get("mcp-protocol-version")
        if version is not None and version.strip() != record.protocol_version:  # served, but not in this session
            raise ProtocolVersionMismatchError(version.strip()[:64], record.protocol_version)
        return record

    def _reject_modern_header(self, headers: HeaderMap) -> Response | None:
        """GET/DELETE: the 2026 era has neither (405), nor stateless mode (no stream, no session:
        405); a 2025 request must name a served version (400)."""
        if choose_era(headers, None) == "modern" or self.settings.session_mode == "stateless":
            return Response(status_code=405, headers={"Allow": "POST"})
        check_legacy_version(headers)
        return None

    async def _get(self, request: Request, headers: HeaderMap) -> Response:
        rejected = self._reject_modern_header(headers)
        if rejected is not None:
            return rejected
        if not accepted(headers)[1] or headers.get("accept") is None:
            raise NotAcceptableError("Not Acceptable: Client must accept text/event-stream")
        session = await self._session(headers, request.scope)
        if self.streams.serves("legacy", session):  # resumable: Last-Event-ID, stored events
            async with self._store_work(request.scope):
                return await self.streams.get(headers, session, _tenant_of(request.scope))
        if self.shutdown_coordinator.shutting_down:
            raise ServerShuttingDownError()
        live = self.live.get(session.id)
        messages = live.open_standalone(self.settings.stream_buffer_size)
        if messages is None or live.standalone_send is None:
            return _error_response(StreamConflictError())
        detach = await self.notifier.attach_get_stream(_tenant_of(request.scope), session.id, live.standalone_send, live.close_standalone)

        def closed() -> None:
            detach()
            live.close_standalone()
            session.last_seen = time.time()  # the idle timer restarts when the stream ends
            self.live.release(session.id)

        return StandaloneStream(messages, closed, headers={_SESSION_HEADER: session.id}, keepalive_seconds=self.settings.keepalive_seconds)

    async def _delete(self, request: Request, headers: HeaderMap) -> Response:
        rejected = self._reject_modern_header(headers)
        if rejected is not None:
            return rejected
        session = await self._session(headers, request.scope)
        async with self._store_work(request.scope):
            await self.sessions.delete(session.id)
        self.live.end(session.id)
        async with self._store_work(request.scope):
            await self.notifier.session_ended(session.id)
            self.pending.close_scope(session.id)
            await self.streams.session_ended(session.id)
            await self.relay.session_ended(session.id)  # the other replicas end theirs
        return Response(status_code=200)

    # -- JSON-RPC batches (2025-03-26 sessions; _server/batch.py) -------------------------
    def _batch_hooks(self, request_scope: Scope) -> BatchHooks:
        async def deliver(answer: JsonRpcResponse, scope: str | None) -> bool:
            async with self._store_work(request_scope):
                return await self._deliver_answer(answer, scope)

        async def notified(message: JsonRpcNotification, session: SessionRecord) -> None:
            """A notification inside a batch: acted on as if POSTed alone."""
            if not self._legacy_notification(message, session):  # the call may run on another replica
                async with self._store_work(request_scope):
                    await self.relay.forward_cancel(session.id, message.params["requestId"], message.params.get("reason"))

        return BatchHooks(self.settings, self.dispatcher, self._session, deliver, notified)
