"""``McpRouter``: an ``APIRouter`` serving MCP on one path (POST, GET, DELETE), both eras.

Data flows one way: HTTP (``_server.endpoint``, mounted here) → JSON-RPC frame (``_wire.jsonrpc``) → era
and envelope (``_wire.envelope``) → method table (``_server.dispatch``) → dependency resolution
(``_handlers.resolve``) → handler → result shaping (``_handlers.results``) → JSON or SSE
(``_transport.streams``); the layers: docs/architecture.md.

Spec: 2025-11-25 ``basic/transports`` (Streamable HTTP, sessions) and 2026-07-28
``basic/transports/streamable-http`` (single exchange, required headers).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, params
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from ._auth.resource_metadata import ensure_root_routes
from ._auth.sealing import request_state_sealer
from ._fastapi_compat import build_dependant
from ._fastapi_routes import LeanRoute
from ._handlers.feature_routes import FeatureRoutes
from ._handlers.features import Features
from ._handlers.registry import ToolRegistry
from ._handlers.tool_routes import ToolRoutes
from ._replicas.relay import Relay
from ._replicas.stores import readiness, replica_stores
from ._server.dispatch import Dispatcher
from ._server.endpoint import McpEndpoint
from ._tasks.engine import TaskEngine
from ._tasks.stores import task_store
from ._transport.bus import MessageBus
from ._transport.events import EventStore
from ._transport.listen import ListenHub
from ._transport.notifications import CALLER, Notifier, served_from
from ._transport.pending import PendingRequests
from ._transport.resumable import ResumableStreams
from ._transport.sessions import LiveSessions, SessionStore
from ._transport.shutdown import ShutdownCoordinator
from ._transport.subscriptions import ResourceSubscriptions
from .backends import StateBackend, backend_from_url
from .backends._per_process import guard_state_factory
from .errors import ConfigurationError
from .settings import McpSettings, SessionMode, get_settings
from .state import ContextState, derive_cursor_key

__all__ = ["McpRouter", "mounted_router_message"]

logger = logging.getLogger("fastapi_mcp_ctx")
F = TypeVar("F", bound=Callable[..., Any])
class McpRouter(ToolRoutes, FeatureRoutes, APIRouter):
    """An ``APIRouter`` that serves the Model Context Protocol at ``path`` (default ``/mcp``).

    Add it with ``app.include_router(mcp_router)``; it needs no lifespan of its own. Never
    ``app.mount("/mcp", mcp_router)``: a mounted router answers every request with HTTP 500 naming
    that fix, and ``McpTestClient``, ``serve`` and ``stdio`` refuse it at start-up.
    Register tools with :meth:`tool`; resources, prompts, completers: ``_handlers.feature_routes``.

    Args:
        path: the MCP endpoint path (POST, GET and DELETE on it).
        settings: server settings; default: ``McpSettings()`` read from ``MCP_*`` env vars.
        session_store: where 2025-era sessions live (default: in memory).
        authenticate: a FastAPI dependency resolved once per MCP HTTP request, before
            dispatch, returning a :class:`~fastapi_mcp_ctx.auth.Principal` (None or
            ``HTTPException(401)`` → 401). It gives ``ctx.auth`` and ``ctx.tenant_id`` and binds
            2025 sessions to the principal's subject. Without it the tenant is ``"default"``.
        state_backend: the ``ctx.state`` backend (default: built from ``settings.storage_url``;
            it connects lazily on first use; close it with :meth:`aclose` at shutdown).
        dependencies: run before every tool, resource, prompt and completer call, in its graph (not on
            the HTTP request: use ``app.include_router(router, dependencies=[...])`` to guard
            every MCP request, ``initialize`` included).
        list_changed: the lists whose changes the application announces, any of ``"tools"``,
            ``"prompts"``, ``"resources"``: advertised as ``<kind>.listChanged`` and published
            by ``notify_<kind>_list_changed()``. Empty (the default) and no
            ``resources_subscribe``: 2026 ``subscriptions/listen`` answers ``-32601``.
        resources_subscribe: the application announces resource updates
            (``notify_resource_updated``): advertised as ``resources.subscribe``.
        bus: the replica bus notifications travel on (default: in process; replicas share one).
        subscription_registry: 2025 ``resources/subscribe`` records (default: in process).
        require_session_mode: the session mode this application needs (``"stateful"`` for one
            whose tools ask the client with ``ctx.send_request``): a resolved
            ``MCP_SESSION_MODE`` that differs raises :class:`~fastapi_mcp_ctx.errors.ConfigurationError`
            here, at start-up, naming the setting.
        expose_stateless_session_id: overrides ``MCP_EXPOSE_STATELESS_SESSION_ID``: 2025 requests
            served without a session get a fresh per-request token as ``ctx.session_id``.
        event_store: where the events of resumable 2025 SSE streams are kept (default: in
            process, bounded by ``MCP_EVENT_RETENTION_COUNT`` / ``MCP_EVENT_RETENTION_SECONDS``).
        **kwargs: any other ``APIRouter`` argument (``prefix``, ``tags``...).
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        settings: McpSettings | None = None,
        session_store: SessionStore | None = None,
        state_backend: StateBackend | None = None,
        authenticate: Callable[..., Any] | None = None,
        dependencies: Sequence[params.Depends] | None = None,
        list_changed: Iterable[str] = (),
        resources_subscribe: bool = False,
        bus: MessageBus | None = None,
        subscription_registry: ResourceSubscriptions | None = None,
        require_session_mode: SessionMode | None = None,
        expose_stateless_session_id: bool | None = None,
        event_store: EventStore | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.settings = settings or get_settings()
        if expose_stateless_session_id is not None:
            self.settings = self.settings.model_copy(update={"expose_stateless_session_id": expose_stateless_session_id})
        if require_session_mode is not None and self.settings.session_mode != require_session_mode:
            raise ConfigurationError(
                f"This application requires session mode {require_session_mode!r} (McpRouter(require_session_mode=...)), "
                f"but MCP_SESSION_MODE (McpSettings.session_mode) is {self.settings.session_mode!r}: "
                f"set MCP_SESSION_MODE={require_session_mode}"
            )
        self.mcp_path = path or self.settings.path
        self.tool_dependencies: list[params.Depends] = list(dependencies or [])
        self.registry = ToolRegistry()
        self._authenticate = (
            build_dependant(
                "authenticate",
                [inspect.Parameter("principal", inspect.Parameter.KEYWORD_ONLY, default=Depends(authenticate))],
                [],
                self.mcp_path,
            )
            if authenticate is not None
            else None
        )
        self.live = LiveSessions()
        self.replica_stores = replica_stores(self.settings, pinned=self._get_stream_open)  # MCP_SESSION_STORE_URL
        self.sessions: SessionStore = session_store or self.replica_stores.sessions
        self.state_backend: StateBackend = state_backend or self._backend_from_settings()
        self.request_state = request_state_sealer(self.settings, state_backend=self.state_backend, session_store=session_store)
        cursor_key = derive_cursor_key(self.settings.request_state_key)
        backend = self.state_backend

        def state_factory(tenant_id: str | None) -> ContextState:
            return ContextState(backend, tenant_id, cursor_key=cursor_key)

        self._own_bus = bus is None
        self.bus: MessageBus = bus if bus is not None else self.replica_stores.bus
        self.subscriptions: ResourceSubscriptions = subscription_registry or self.replica_stores.subscriptions
        self.notifier = Notifier(
            served_from(list_changed, resources_subscribe),
            self.bus,
            self.subscriptions,
            ListenHub(
                max_streams=self.settings.listen_max_streams,
                buffer_size=self.settings.stream_buffer_size,
                max_per_owner=self.settings.listen_owner_quota,
            ),
            authenticated=authenticate is not None or self.settings.auth_mode in ("jwt", "oauth"),
        )
        conf = self.settings
        self.shutdown_coordinator = ShutdownCoordinator(grace_seconds=conf.shutdown_grace_seconds, signals=conf.shutdown_signals)
        self.shutdown_coordinator.add_stream_group(lambda: self.notifier.aclose(conf.shutdown_grace_seconds), self.notifier.open_streams)
        self.event_store: EventStore = event_store if event_store is not None else self.replica_stores.events
        self.relay = Relay(self.bus)  # what this replica forwards to the others (and runs for them)
        leases = self.replica_stores.leases_for(self.sessions)
        self.streams = ResumableStreams(self.event_store, conf, self.shutdown_coordinator, self.notifier, leases, self.relay.get_stream_opened)
        self.features = Features(self.subscriptions, page_size=conf.page_size)  # resources, prompts, completions
        self.pending = PendingRequests(origin=self.relay.origin)  # answers to ctx.send_request, by session; ids name this replica
        self.dispatcher = Dispatcher(
            self.registry,
            conf,
            self.sessions,
            self.live,
            guard_state_factory(state_factory, backend),  # memory ctx.state under serve --workers N: refused at first use
            self.notifier,
            pending=self.pending,
            streams=self.streams,
            shutdown=self.shutdown_coordinator, sealer=self.request_state, features=self.features,
        )
        self.relay.bind(live=self.live, pending=self.pending, streams=self.streams, notifier=self.notifier)
        self.tasks = TaskEngine(
            task_store(conf, self.replica_stores.link), conf, self.shutdown_coordinator, self.relay.forward_task, self.notifier.task_changed
        )
        self.dispatcher.tasks = self.tasks  # tool(task=...): the tasks/* methods of both eras (_tasks)
        self.relay.bind_tasks(self.tasks.on_relay)
        self.endpoint = McpEndpoint(
            self,
            settings=conf,
            sessions=self.sessions,
            live=self.live,
            dispatcher=self.dispatcher,
            streams=self.streams,
            notifier=self.notifier,
            shutdown_coordinator=self.shutdown_coordinator,
            pending=self.pending,
            authenticate=self._authenticate,
            relay=self.relay,
        )
        self.lifespan_context = self.endpoint.lifespan(self.lifespan_context)  # start-up: logs, pointer (McpEndpoint.start)
        self.routes.append(
            LeanRoute(
                self.prefix + self.mcp_path,
                self.endpoint.handle,
                methods=["POST", "GET", "DELETE"],
                name="mcp",
                include_in_schema=False,
            )
        )
        self.routes.extend(self.endpoint.metadata_routes)  # RFC 9728 at root paths (_auth.resource_metadata)

    def _backend_from_settings(self) -> StateBackend:
        """``ctx.state``'s backend from ``MCP_STORAGE_URL``; a scheme no backend serves is a
        :class:`ConfigurationError` naming the setting (raised by ``McpRouter(...)``)."""
        try:
            return backend_from_url(self.settings.storage_url, create_tables=self.settings.storage_create_tables)
        except ValueError as exc:
            raise ConfigurationError(f"MCP_STORAGE_URL: {exc}") from None

    def _get_stream_open(self, session_id: str) -> bool:
        """Whether ``session_id``'s GET stream has a connection in this process (plain or resumable)."""
        return self.live.streaming(session_id) or self.streams.get_stream_attached(session_id)

    def serve_metadata(self, app: Any) -> None:
        """Serve the RFC 9728 metadata at ``app``'s root now (done at the first MCP request
        otherwise), for a router included under a prefix; see docs/auth.md."""
        ensure_root_routes(app, self.endpoint.metadata_routes)

    async def aclose(self, *, grace_seconds: float = 5.0) -> None:
        """Release what the router holds open. Call at shutdown::

            @asynccontextmanager
            async def lifespan(app):
                yield
                await mcp_router.aclose()

        Every 2026 listen stream is ended gracefully (its answer ``{"resultType": "complete"}``
        is sent; at most ``grace_seconds`` are spent waiting for the answers to go out), the
        2025 GET streams of this process end, later listen requests get 503, then the bus
        (when the router made it) and the state backend's pools are closed (its data is kept;
        its next call reconnects, docs/state.md "Lifecycle").
        """
        await self.streams.aclose()
        await self.notifier.aclose(grace_seconds)
        if self._own_bus:
            await self.bus.aclose()
        await self.replica_stores.aclose()
        await self.state_backend.aclose()

    # -- graceful shutdown (see _transport/shutdown.py) ----------------------------------
    @property
    def shutting_down(self) -> bool:
        """True once shutdown began (new sessions and streams get 503 + ``Retry-After``)."""
        return self.shutdown_coordinator.shutting_down

    def begin_shutdown(self) -> None:
        """Start a graceful shutdown in the background; call it on the event loop when the
        server begins to stop (done for you on SIGTERM/SIGINT under uvicorn, gunicorn's
        uvicorn worker and hypercorn unless ``MCP_SHUTDOWN_SIGNALS=false``).

        Every open stream ends at once: resumable 2025 connections after a ``retry`` hint (the
        client resumes on another replica), 2025 GET streams, 2026 listen streams with their
        graceful answer. Calls still running get ``MCP_SHUTDOWN_GRACE_SECONDS``, then are
        cancelled and answered 503 + ``Retry-After``. New sessions and streams get 503.
        """
        self.shutdown_coordinator.begin()

    async def shutdown(self) -> None:
        """Like :meth:`begin_shutdown`, and return once every stream has ended and every call
        has finished or been cancelled (at most about ``MCP_SHUTDOWN_GRACE_SECONDS``)."""
        await self.shutdown_coordinator.shutdown()

    async def check(self) -> None:
        """Verify at start-up what would otherwise fail at first use: the state backend is
        reachable and usable (SQL: the schema exists at the revision this version needs).
        Opt in from the app's lifespan::

            @asynccontextmanager
            async def lifespan(app):
                await mcp_router.check()    # refuse to start with a missing schema
                yield
                await mcp_router.aclose()

        Also the shared session store when there is one (``MCP_SESSION_STORE_URL=redis…``).

        Raises:
            ConfigurationError: e.g. the SQL schema is missing or outdated; the message names
                ``fastapi-mcp-ctx migrate``; a ``redis://`` URL names a node of a Redis Cluster
                (the message names ``redis+cluster://``).
            StateUnavailableError: the backend cannot be reached.
        """
        await self.state_backend.check()
        store_check = getattr(self.sessions, "check", None)
        if store_check is not None:
            await store_check()

    # -- server-initiated notifications (spec 2025-11-25 basic/transports §Listening,
    #    2026-07-28 basic/patterns/subscriptions; see _transport/notifications.py) ---------
    async def notify_tools_list_changed(self) -> None:
        """Announce a tool-list change: on each 2025 session's GET stream and on each 2026
        listen stream that asked for it, on every replica (one copy per stream).

        Raises:
            RuntimeError: ``list_changed`` does not name ``"tools"``.
        """
        await self.notifier.list_changed("tools")

    async def notify_prompts_list_changed(self) -> None:
        """Like :meth:`notify_tools_list_changed`, for prompts (needs ``list_changed={"prompts"}``)."""
        await self.notifier.list_changed("prompts")

    async def notify_resources_list_changed(self) -> None:
        """Like :meth:`notify_tools_list_changed`, for resources (needs ``list_changed={"resources"}``)."""
        await self.notifier.list_changed("resources")

    async def notify_resource_updated(self, uri: str, *, tenant_id: Any = CALLER) -> None:
        """Send ``notifications/resources/updated {uri}`` only to its subscribers of one tenant:
        2025 sessions in :attr:`subscriptions` (on their GET stream), 2026 listen streams naming
        ``uri``. Resources belong to a tenant; another tenant's subscribers never get it.

        Args:
            tenant_id: whose subscribers. Default: the tenant of the MCP request being served;
                outside a request, ``"default"`` on a router without ``authenticate``.
        Raises:
            RuntimeError: ``resources_subscribe`` is not set. TypeError: ``uri`` is not a str.
            ValueError: outside a request on an authenticating router without ``tenant_id``.
        """
        await self.notifier.resource_updated(uri, tenant_id=tenant_id)

    async def send_notification_to_session(
        self, session_id: str, method: str, params: dict[str, Any] | None = None, *, tenant_id: Any = CALLER
    ) -> bool:
        """Send a notification to one 2025 session, on its GET stream (whichever replica holds it).

        Args:
            session_id: an ``Mcp-Session-Id`` (``ctx.session_id``, :meth:`active_sessions`).
            method / params: the notification (``params`` a JSON-serializable dict).
            tenant_id: whose session it must be. Default: the tenant of the MCP request being
                served; outside a request, ``"default"`` on a router without ``authenticate``
                (``ValueError`` with ``authenticate``: pass it explicitly).
        Returns:
            False when that tenant has no such session or its GET stream is not open
            (2026-era clients have no session: use the listen notifications instead). With
            several replicas the message is appended to the session's GET stream in the shared
            store (True also when its replica died: a resume on any replica replays it); False
            when no GET stream of the session runs on.
        Raises:
            TypeError: ``method`` is not a str or ``params`` is not JSON-serializable.
        """
        tenant = self.notifier.caller_tenant(tenant_id, authenticated=self._authenticate is not None)
        return await self.notifier.send_to_session(tenant, session_id, method, params)

    async def active_sessions(self, *, tenant_id: Any = CALLER) -> list[str]:
        """Ids of the tenant's 2025 sessions that can be reached now (their GET stream is open on
        some replica), sorted. ``tenant_id`` as in :meth:`send_notification_to_session`."""
        return await self.notifier.active_sessions(self.notifier.caller_tenant(tenant_id, authenticated=self._authenticate is not None))

    async def ready(self) -> dict[str, Any]:
        """Readiness of this replica's stores (for a load balancer's health check): ``{"ready":
        bool, "checks": {"sessions", "events", "bus", "state": "ok" | "in-process" |
        "unavailable: <why>"}}``. Never raises; see docs/architecture.md "Replicas"."""
        return await readiness(sessions=self.sessions, events=self.event_store, bus=self.bus, state=self.state_backend)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse to serve as an ASGI app: an ``McpRouter`` is only called so when it is mounted
        (``app.mount("/mcp", mcp_router)``), which leaves its endpoint at ``/mcp/mcp`` and its
        lifespan unrun; ``app.include_router`` copies its routes and never calls it. Answers
        HTTP 500 with a JSON-RPC ``-32603`` naming the fix, and logs it once per request."""
        if scope["type"] not in ("http", "websocket"):  # a mounted app gets no lifespan; nothing else expected
            return
        message = mounted_router_message(str(scope.get("root_path", "")) or None)
        logger.error(message)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1011, "reason": message[:120]})
            return
        response = JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": message}}, status_code=500)
        await response(scope, receive, send)


def mounted_router_message(mount_path: str | None) -> str:
    """Why a mounted ``McpRouter`` serves nothing and what to write instead (``mount_path``: where
    it was mounted, when known)."""
    where = f"app.mount({mount_path!r}, mcp_router)" if mount_path else "app.mount(..., mcp_router)"
    return (
        f"An McpRouter is mounted ({where}): a mounted router serves nothing (its endpoint would sit at "
        "<mount>/mcp and its lifespan never runs). Use app.include_router(mcp_router) instead of app.mount(...) "
        "(the endpoint path is McpRouter(path=...), default /mcp)"
    )
