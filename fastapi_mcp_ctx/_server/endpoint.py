"""The Streamable HTTP exchange of both eras on one path: POST, GET and DELETE.

``McpRouter`` (registration and the public methods) mounts one :class:`McpEndpoint` as its
route (served by the app's router directly when it has no dependency: ``claim.py``). A request
goes through the front door in one pass (``front_door.py``: the route's header screen, transport
checks, the bounded body read, authentication, POST negotiation, the frame and the era), then
its era's envelope and, in the 2025 era, its session (``session_gate.py``: ``initialize``,
``Mcp-Session-Id``, the GET stream, DELETE), and the :class:`~fastapi_mcp_ctx._server.dispatch.Dispatcher`
gets the message, its envelope and its session.

Spec: 2025-11-25 ``basic/transports`` (Streamable HTTP, sessions) and 2026-07-28
``basic/transports/streamable-http`` (single exchange, required headers).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Scope

from .._auth.gate import announce_admission, build_gate
from .._auth.resource_metadata import challenge, ensure_root_routes, metadata_routes
from .._auth.sealing import announce_process_key
from .._context.event_loop import LOOP_SCOPE_KEY
from .._context.logger import install_default_handler
from .._fastapi_routes import flat_routes
from .._replicas.relay import Relay
from .._transport.notifications import Notifier
from .._transport.pending import PendingRequests
from .._transport.resumable import ResumableStreams
from .._transport.sessions import LiveSessions, SessionRecord, SessionStore
from .._transport.shutdown import ShutdownCoordinator
from .._wire.envelope import (
    HeaderMap,
    RequestEnvelope,
    check_legacy_version,
    read_legacy_envelope,
    read_modern_envelope,
)
from .._wire.jsonrpc import JsonRpcNotification, JsonRpcRequest, JsonRpcResponse, request_id_of
from .._wire.versions import MODERN_PROTOCOL_VERSIONS
from ..errors import (
    InvalidRequestError,
    MalformedAnswerError,
    McpError,
    NotAcceptableError,
    StateUnavailableError,
    UnsupportedVersionError,
)
from ..settings import McpSettings
from .batch import BatchHooks, serve_batch
from .batch_core import starts_batch
from .claim import claim_lean_paths
from .dispatch import Dispatcher
from .front_door import Admission, FrontDoor, frame
from .gcfreeze import freeze_startup_objects
from .http import BODY_SCOPE_KEY, HEADERS_SCOPE_KEY, screen_headers
from .lost_requests import install_pointer
from .outcomes import error_reply, json_reply
from .session_gate import SESSION_HEADER, SessionGate, error_response

__all__ = ["McpEndpoint"]

Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]

logger = logging.getLogger("fastapi_mcp_ctx")
_BATCH_OPENERS: Final = b"[ \t\r\n"
"""The first bytes of a body that may open an array (``b""`` is in it too): only these ask
:func:`starts_batch`; a JSON object's ``{`` needs no call."""


async def _answered(response: Response) -> Response:
    """``response``, to await where a coroutine is expected."""
    return response


class McpEndpoint:
    """The HTTP exchange of one ``McpRouter`` (its route's endpoint is :meth:`handle`).

    Args:
        router: the ``McpRouter`` this endpoint serves (found again from the route by
            ``_discovery`` and ``testing``; never called from here).
        settings / sessions / live / dispatcher / streams / notifier / shutdown_coordinator /
            pending: the router's collaborators, shared with it (the session ones are held by
            :class:`~.session_gate.SessionGate`).
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
        self.dispatcher = dispatcher
        self.shutdown_coordinator = shutdown_coordinator
        self.pending = pending
        self._authenticate = authenticate
        self.authenticate: Any = authenticate  # the dependant, or None; the stdio transport runs it too (_stdio.session)
        self.relay = relay if relay is not None else Relay(notifier.bus)  # forwarding between replicas
        self._log_checked = False
        self.session_gate = SessionGate(
            settings=settings, sessions=sessions, live=live, dispatcher=dispatcher, streams=streams, notifier=notifier,
            shutdown_coordinator=shutdown_coordinator, pending=pending, relay=self.relay,
        )  # fmt: skip
        self._session = self.session_gate.session
        self._legacy_notification = self.session_gate.notification
        self._store_work = self.session_gate.store_work
        registry, features = dispatcher.registry, dispatcher.features

        def scopes() -> set[str]:  # what a 401 challenge and the metadata advertise: tools, resources, prompts
            return registry.scopes() | (features.scopes() if features is not None else set())

        self.gate = build_gate(settings, authenticate is not None, scopes)  # MCP_AUTH_MODE (None: nothing to run)
        bearer_mode = settings.auth_mode in ("jwt", "oauth") or settings.resource_url is not None
        self._challenge = challenge(settings) if bearer_mode else None  # authenticate='s 401: Bearer only in a bearer mode
        self.door = FrontDoor(settings, self.gate, authenticate, self._challenge)  # transport, body, authentication
        self.metadata_routes = metadata_routes(settings, scopes)  # RFC 9728, served at the app's root

    def screen(self, scope: Scope) -> Response | None:
        """The route's first look at an HTTP request (``LeanRoute.handle``), before FastAPI solves
        any app, router or route dependency: the 431 header bound and a repeated ``Host``,
        ``Origin`` or credential header (:func:`screen_headers`) as a JSON-RPC error answer (id
        null: the body is not read yet), or None to let the request through."""
        try:
            scope[HEADERS_SCOPE_KEY] = screen_headers(scope["headers"], self.settings.max_request_header_bytes)
        except McpError as exc:
            return error_response(exc, None)
        return None

    # -- HTTP ----------------------------------------------------------------------------
    def lifespan(self, original: Lifespan) -> Lifespan:
        """``original`` (a router's ``lifespan_context``) that first runs :meth:`start` on the app
        running it: ``include_router`` merges it into the app's lifespan, called with the app.
        Its shutdown waits for the graceful shutdown (running calls and tasks get
        ``MCP_SHUTDOWN_GRACE_SECONDS``, a task's end is written: ``ShutdownCoordinator.at_exit``)."""

        @asynccontextmanager
        async def lifespan(app: Any) -> AsyncGenerator[Any]:
            self.shutdown_coordinator.reopen()  # a lifespan run again after a finished shutdown (tests)
            self.start(app)
            async with original(app) as state:
                yield state
            await self.shutdown_coordinator.at_exit()

        return lifespan

    def start(self, app: Any, path: str | None = None) -> None:
        """Once per endpoint: at the app's start-up (``McpRouter``'s lifespan) or, for an app whose
        lifespan does not run, at the first request. By then the application configured its
        logging, or not. Installs the default log handler, the root RFC 9728 routes and the
        lost-request pointer on ``app``, and logs who the endpoint at ``path`` serves."""
        if self._log_checked:
            return
        self._log_checked = True
        if self.settings.gc_freeze:
            freeze_startup_objects()
        install_default_handler(self.settings.log_level)
        announce_process_key(self.settings)
        ensure_root_routes(app, self.metadata_routes)
        install_pointer(app)  # a later lost MCP request's 404 names this path (lost_requests)
        claim_lean_paths(app)  # the router hands a dependency-free MCP path to its route directly (claim)
        if path is None:
            path = next((p for p, route in flat_routes(getattr(app, "routes", [])) if p and getattr(route, "endpoint", None) == self.handle), self.settings.path)
        announce_admission(self.settings, self._authenticate is not None, path)

    async def handle(self, request: Request) -> Response:
        """The route's endpoint: one MCP HTTP request of either era, through the front door
        (``front_door.py``) to the session gate or the dispatcher."""
        if not self._log_checked:
            self.start(request.app, request.scope.get("path", self.settings.path))
        loop = self.shutdown_coordinator.first_use()
        if loop is not None:  # asked once a request (_context.event_loop)
            request.scope[LOOP_SCOPE_KEY] = loop
        if not self.relay.started:  # this replica's bus channels, at first use (after any fork)
            await self._start_relay(request.scope)
        method = request.scope["method"]
        admission = Admission()
        try:
            headers = await self.door.admit(request, admission)  # transport checks, bounded body read, authentication
            if method == "POST":
                response = await self._post(request, headers)
            elif method == "GET":
                response = await self.session_gate.get(request, headers)
            else:
                response = await self.session_gate.delete(request, headers)
        except McpError as exc:
            response = error_response(exc, request_id_of(exc))
        except ClientDisconnect:
            return Response(status_code=400)
        if admission.outcome is not None:
            admission.outcome.apply(response)
        return response

    async def _start_relay(self, scope: Scope) -> None:
        try:
            async with self._store_work(scope):
                await self.relay.start()
        except StateUnavailableError:  # the deadline passed: forwarding starts at a later request
            logger.warning("the replica bus did not answer within MCP_SESSION_STORE_DEADLINE_SECONDS")

    def _post(self, request: Request, headers: HeaderMap) -> Awaitable[Response]:
        """A POST's checks and frame, then the era's handling to await (a plain function: the
        handling's coroutine is awaited by :meth:`handle` itself, one coroutine less a request).

        Raises:
            McpError: the checks' or the frame's refusal (raised before anything is awaited).
        """
        sse_allowed = self.door.negotiate(request, headers)  # Content-Type, Content-Encoding, Accept
        body: bytes = request.scope[BODY_SCOPE_KEY]
        if body[:1] in _BATCH_OPENERS and starts_batch(body):  # an array: served in 2025-03-26 sessions only (batch.py)
            return serve_batch(self._batch_hooks(request.scope), request, headers, sse_allowed)
        try:
            message, era = frame(body, headers)  # the JSON-RPC message and its era
        except MalformedAnswerError as exc:
            return self._fail_waiter(exc, request, headers)
        if era == "modern":
            return self._post_modern(message, request, headers, sse_allowed)
        return self._post_legacy(message, request, headers, sse_allowed)

    async def _fail_waiter(self, exc: MalformedAnswerError, request: Request, headers: HeaderMap) -> Response:
        """A malformed answer of a session's client fails the request waiting for its id at once;
        then ``exc`` is raised (400)."""
        if SESSION_HEADER in headers:
            try:
                session = await self._session(headers, request.scope)
            except McpError:
                session = None  # unknown or foreign session: nothing of it waits here
            if session is not None:
                failed = JsonRpcResponse(exc.answer_id, None, {"code": -32600, "message": f"The client's answer was malformed: {exc.message}"})
                try:
                    async with self._store_work(request.scope):
                        await self._deliver_answer(failed, session.id)
                except StateUnavailableError:
                    pass  # the malformed answer is refused anyway (400); its waiter times out
        raise exc

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

    def _post_legacy(
        self,
        message: JsonRpcRequest | JsonRpcNotification | JsonRpcResponse,
        request: Request,
        request_headers: HeaderMap,
        sse_allowed: bool,
    ) -> Awaitable[Response]:
        """A 2025 POST: a request without a session goes to the dispatcher here (a plain function:
        :meth:`handle` awaits the dispatcher's coroutine itself); ``initialize``, a session's
        messages, notifications and answers in :meth:`_post_legacy_other`."""
        mode = self.settings.session_mode  # auto: a session when the request names one, else none
        in_session = mode == "stateful" or (mode == "auto" and SESSION_HEADER in request_headers)
        if in_session or not isinstance(message, JsonRpcRequest) or message.method == "initialize":
            return self._post_legacy_other(message, request, request_headers, sse_allowed, in_session)
        try:
            check_legacy_version(request_headers)
        except McpError as exc:
            exc.request_id = message.id  # type: ignore[attr-defined]
            raise
        return self._legacy_request(message, request, request_headers, sse_allowed, None)

    async def _post_legacy_other(
        self,
        message: JsonRpcRequest | JsonRpcNotification | JsonRpcResponse,
        request: Request,
        request_headers: HeaderMap,
        sse_allowed: bool,
        in_session: bool,
    ) -> Response:
        try:
            check_legacy_version(request_headers)
            if isinstance(message, JsonRpcRequest) and message.method == "initialize":
                return await self.session_gate.initialize(message, request.scope)
            session = await self._session(request_headers, request.scope) if in_session else None
        except McpError as exc:
            exc.request_id = message.id if isinstance(message, JsonRpcRequest) else None  # type: ignore[attr-defined]
            raise
        if not isinstance(message, JsonRpcRequest):
            return await self._legacy_not_request(message, request, session)
        return await self._legacy_request(message, request, request_headers, sse_allowed, session)

    def _legacy_request(
        self, message: JsonRpcRequest, request: Request, request_headers: HeaderMap, sse_allowed: bool, session: SessionRecord | None
    ) -> Awaitable[Response]:
        """A 2025 request's envelope, then the dispatcher's coroutine to await."""
        headers = {SESSION_HEADER: session.id} if session is not None else {}
        if session is not None:
            version = session.protocol_version
        else:
            header_version = request_headers.get("mcp-protocol-version")
            version = header_version.strip() if header_version else "2025-03-26"
        try:
            envelope: RequestEnvelope = read_legacy_envelope(request_headers, message.params, version)
        except McpError as exc:  # a bad _meta (progressToken...): the request's own error, its id echoed
            return _answered(json_reply(error_reply(message.id, exc, "legacy"), headers))
        if session is not None:
            envelope.client_capabilities, envelope.client_info = session.client_metadata_parsed()
        return self.dispatcher.dispatch(message, envelope, request, session, headers, sse_allowed)

    async def _legacy_not_request(self, message: JsonRpcNotification | JsonRpcResponse, request: Request, session: SessionRecord | None) -> Response:
        """202 for a 2025 notification (a cancel acted on here or forwarded) or a client's answer
        to ``ctx.send_request`` (matched in its session)."""
        headers = {SESSION_HEADER: session.id} if session is not None else {}
        if isinstance(message, JsonRpcResponse):
            scope = session.id if session is not None else None
            async with self._store_work(request.scope):
                delivered = await self._deliver_answer(message, scope)
            if not delivered:
                logger.debug("ignored a client response to an unknown request id %r", message.id)
            return Response(status_code=202, headers=headers)
        if not self._legacy_notification(message, session) and session is not None:  # the call may run elsewhere
            async with self._store_work(request.scope):
                await self.relay.forward_cancel(session.id, message.params["requestId"], message.params.get("reason"))
        return Response(status_code=202, headers=headers)

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
