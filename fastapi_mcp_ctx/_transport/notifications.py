"""Change notifications on the right stream, in both eras, through the replica bus.

One :class:`Notifier` per router. What it publishes, and where each message lands:

- list changes (``notifications/{tools,prompts,resources}/list_changed``): published once on
  the bus ``events`` channel; every replica puts it on each 2025 GET stream it holds (one
  stream per session, never a POST stream) and on each of its 2026 listen streams whose
  filter asked for it;
- ``notifications/resources/updated``: 2025: published to the channel of each session the
  :class:`~._transport.subscriptions.ResourceSubscriptions` registry lists for that URI (its
  GET stream only); 2026: on ``events``, to the listen streams that named the URI; both only
  to the tenant the update was published for (the caller's, or ``tenant_id=``): resources
  belong to a tenant, lists are the server's (global);
- :meth:`send_to_session`: any notification to one 2025 session's GET stream, True when a
  replica holds that stream or it was recorded for a resume.

With several replicas (a :class:`Recorder`, the shared event store, is set) what is sent to a
GET stream is recorded whether or not a replica holds it (issue 24 item 5): a list change is
also appended to the broadcast log, its sequence carried on the bus (:data:`BROADCAST_MARK`)
so each GET stream takes it once, from its holder or, for a stream whose holder died, when it
is resumed (``EventStore.catch_up``). A message to one session is appended to that session's
current GET stream in the store directly (``EventStore.to_get_stream``, one atomic step), never
through the bus: its reader tails the store wherever it is, so neither a takeover (the old
holder still subscribed while its stream has ended) nor a bus reconnecting after a failover can
lose it; a session whose GET stream the store does not name running gets ``False``, never a
bus holder's stale stream. Without a recorder (one replica, or ``MCP_HTTP_RESUMABILITY`` off:
GET streams the store does not keep), or to a stdio session, the session's bus channel carries it.

Only what the application declared is published (``McpRouter(list_changed=...,
resources_subscribe=...)``): publishing an undeclared kind is a programming error
(``RuntimeError``), because clients were told not to expect it (B53). A GET stream that falls
``buffer_size`` notifications behind is ended (the client reconnects) rather than growing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol, get_args

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from .._wire.jsonrpc import RequestId, dumps, notification_message
from .._wire.uris import normalize_uri
from ..context import get_request_context
from .bus import EVENTS_CHANNEL, MessageBus, Unsubscribe, encode_message, session_channel, session_prefix
from .listen import TASK_OWNER_KEY, TENANT_KEY, ListenHub, ListenStream
from .listen_filter import LIST_CHANGED_METHODS, TASK_METHOD, UPDATED_METHOD, ChangeKind, ListenFilter, Served
from .subscriptions import ResourceSubscriptions

__all__ = ["BROADCAST_MARK", "CALLER", "Notifier", "Recorder", "served_from", "tenant_scope"]

logger = logging.getLogger("fastapi_mcp_ctx")

_KINDS: Final[frozenset[str]] = frozenset(get_args(ChangeKind))
BROADCAST_MARK: Final = "fastapi_mcp_ctx.broadcast"
"""The bus key of a list change's sequence in the broadcast log (never sent to a client)."""


class Recorder(Protocol):
    """Where GET-stream messages are recorded whoever holds the stream (the shared event store)."""

    async def broadcast(self, data: bytes) -> int:
        """Record a message for every GET stream; its sequence."""
        ...

    async def to_get_stream(self, session_id: str, data: bytes, *, tenant: str) -> bool:
        """Append a message to the session's GET stream (of ``tenant``); False when none runs on."""
        ...


CALLER: Final[Any] = object()
"""``tenant_id`` default of the router's session methods: the tenant of the request being served."""


def tenant_scope(tenant_id: str | None) -> str:
    """The tag a GET stream is recorded under (its tenant; ``""`` without one)."""
    return "" if tenant_id is None else f"t:{tenant_id}"


def served_from(list_changed: Iterable[str], resources_subscribe: bool) -> Served:
    """Validate the router's declaration.

    Raises:
        ValueError: ``list_changed`` is a bare string or names something other than
            ``"tools"``, ``"prompts"``, ``"resources"``.
    """
    if isinstance(list_changed, str):
        raise ValueError(f"list_changed takes a set of kinds, e.g. list_changed={{{list_changed!r}}}")
    kinds = frozenset(list_changed)
    unknown = kinds - _KINDS
    if unknown:
        raise ValueError(f"list_changed: unknown kind(s) {sorted(unknown)}; use any of 'tools', 'prompts', 'resources'")
    return Served(frozenset(k for k in get_args(ChangeKind) if k in kinds), bool(resources_subscribe))


@dataclass(slots=True)
class _GetStream:
    tenant_id: str | None
    send: MemoryObjectSendStream[dict[str, Any]]
    close: Callable[[], None]
    recorded: bool = False  # the shared store keeps it: a message to its session goes there, not here
    detach: Callable[[], None] | None = None

    def offer(self, message: dict[str, Any]) -> None:
        try:
            self.send.send_nowait(message)
        except anyio.WouldBlock:
            logger.warning("a 2025 GET stream fell behind its buffer and was ended; the client reconnects")
            self.close()
            if self.detach is not None:
                self.detach()  # unreachable from now on: send_notification_to_session says False
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


class Notifier:
    """Publishes change notifications and feeds the long-lived streams of this process.

    Args:
        served: what the application declared (see :func:`served_from`).
        bus: the replica bus (shared by every replica of the endpoint).
        subscriptions: the 2025 resource subscription registry.
        hub: this process's listen streams.
        authenticated: the router authenticates (``tenant_id`` must then be given outside a request).
    """

    def __init__(
        self, served: Served, bus: MessageBus, subscriptions: ResourceSubscriptions, hub: ListenHub, *, authenticated: bool = False
    ) -> None:
        self.authenticated = authenticated
        self.served = served
        self.bus = bus
        self.subscriptions = subscriptions
        self.hub = hub
        self._gets: dict[str, _GetStream] = {}
        self._events: Unsubscribe | None = None
        self._events_lock: anyio.Lock | None = None
        self.recorder: Recorder | None = None  # set when replicas share an event store

    # -- what is advertised ---------------------------------------------------------------
    def capabilities(self, *, methods: frozenset[str], deliverable: bool, subscribe_method: str) -> dict[str, Any]:
        """The ``tools`` / ``prompts`` / ``resources`` members of ``ServerCapabilities``: only
        what is served and can be delivered (B52).

        A kind appears only when its ``<kind>/list`` is in ``methods`` (tools always; prompts and
        resources once one is registered: without one, a declared ``list_changed={"prompts"}`` or
        ``resources_subscribe`` is not advertised, though a 2026 listen stream that asks for it is
        honoured and acknowledged).
        ``listChanged`` / ``subscribe`` are true only when declared and ``deliverable``.

        Args:
            methods: the method table of this era.
            deliverable: the transport and mode carry server notifications (HTTP 2026: listen;
                HTTP 2025 stateful: the GET stream; never stdio or 2025 stateless).
            subscribe_method: the method that takes resource subscriptions in this era
                (``subscriptions/listen`` or ``resources/subscribe``).
        """
        served = self.served
        caps: dict[str, Any] = {}
        for kind in ("tools", "prompts", "resources"):
            if f"{kind}/list" in methods:
                caps[kind] = {"listChanged": deliverable and kind in served.list_changed}
        if "resources" in caps:
            subscribe = deliverable and served.resources_subscribe and subscribe_method in methods
            caps["resources"]["subscribe"] = subscribe
        return caps

    def _require(self, kind: str) -> None:
        if kind == "updated":
            if not self.served.resources_subscribe:
                raise RuntimeError("notify_resource_updated needs McpRouter(resources_subscribe=True) (the capability clients rely on)")
        elif kind not in self.served.list_changed:
            raise RuntimeError(
                f"notify_{kind}_list_changed needs McpRouter(list_changed={{{kind!r}, ...}}): "
                f"the server does not advertise {kind}.listChanged, so clients do not expect it"
            )

    # -- publishing -------------------------------------------------------------------------
    async def list_changed(self, kind: ChangeKind) -> None:
        """Publish ``notifications/<kind>/list_changed`` to every stream that takes it.

        Raises:
            RuntimeError: ``kind`` was not declared in ``list_changed``.
            StateUnavailableError: a network bus cannot be reached.
        """
        self._require(kind)
        message = notification_message(LIST_CHANGED_METHODS[kind])
        if self.recorder is not None:  # recorded for the GET streams nobody holds (their holder died)
            message[BROADCAST_MARK] = await self.recorder.broadcast(dumps(message))
        await self.bus.publish(EVENTS_CHANNEL, message)

    async def resource_updated(self, uri: str, *, tenant_id: Any = CALLER) -> None:
        """Publish ``notifications/resources/updated {uri}`` to the subscribers of ``uri`` of one
        tenant only (``tenant_id`` as in :meth:`caller_tenant`).

        Raises:
            RuntimeError: ``resources_subscribe`` was not declared.
            TypeError: ``uri`` is not a non-empty string.
            ValueError: :data:`CALLER` outside a request on an authenticating router.
        """
        self._require("updated")
        if not isinstance(uri, str) or not uri:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("notify_resource_updated takes the resource URI as a non-empty str")
        tenant = self.caller_tenant(tenant_id, authenticated=self.authenticated)
        message = notification_message(UPDATED_METHOD, {"uri": uri})
        for address in await self.subscriptions.subscribers(normalize_uri(uri)):
            if address.tenant_id == tenant:
                await self._to_session(address.tenant_id, address.session_id, message)
        await self.bus.publish(EVENTS_CHANNEL, {**message, TENANT_KEY: tenant})

    @staticmethod
    def caller_tenant(tenant_id: Any, *, authenticated: bool) -> str | None:
        """``tenant_id`` itself, or for :data:`CALLER`: the tenant of the MCP request being served;
        outside a request ``"default"`` when the router does not authenticate.

        Raises:
            ValueError: :data:`CALLER` outside a request on an authenticating router (say which tenant).
        """
        if tenant_id is not CALLER:
            return tenant_id
        context = get_request_context()
        if context is not None:
            return context.tenant_id
        if not authenticated:
            return "default"
        raise ValueError(
            "Outside an MCP request an authenticating router cannot tell whose sessions you mean: pass tenant_id=<the tenant>"
        )

    async def send_to_session(self, tenant_id: str | None, session_id: str, method: str, params: dict[str, Any] | None) -> bool:
        """Put one notification on a 2025 session's GET stream.

        Returns:
            True when a replica holds that session's stream (of that tenant) and queued it.
        Raises:
            TypeError: ``method`` is not a string, or ``params`` is not a JSON object.
        """
        if not isinstance(method, str) or not method:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("method must be a non-empty str")
        if params is not None and not isinstance(params, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError("params must be a dict (a JSON object) or None")
        message = notification_message(method, params)
        encode_message(message)  # fail on a non-JSON value even when nobody listens
        return await self._to_session(tenant_id, session_id, message)

    async def _to_session(self, tenant_id: str | None, session_id: str, message: dict[str, Any]) -> bool:
        """Put ``message`` on the session's GET stream: with a recorder, appended to the stream the
        store names current (whoever holds it, whether a replica's bus subscription is live or
        not; False when none runs on); without one, or for a stream of this process the store
        does not keep (stdio), published to the session's bus channel."""
        if self.recorder is not None:
            if await self.recorder.to_get_stream(session_id, dumps(message), tenant=tenant_scope(tenant_id)):
                return True
            held = self._gets.get(session_id)
            if held is None or held.recorded:  # a stale holder of an ended stream would drop it
                return False
            # a stream of this process the store does not keep (a stdio session)
        return await self.bus.publish(session_channel(tenant_id, session_id), message) > 0

    async def active_sessions(self, tenant_id: str | None) -> list[str]:
        """Ids of ``tenant_id``'s 2025 sessions whose GET stream is open on some replica."""
        prefix = session_prefix(tenant_id)
        return [name[len(prefix) :] for name in await self.bus.channels(prefix)]

    # -- streams of this process -----------------------------------------------------------
    async def _ensure_events(self) -> None:
        if self._events is not None:
            return
        if self._events_lock is None:
            self._events_lock = anyio.Lock()
        async with self._events_lock:
            if self._events is None:
                self._events = await self.bus.subscribe(EVENTS_CHANNEL, self._on_event)

    def _on_event(self, message: dict[str, Any]) -> None:
        if message.get("method") not in (UPDATED_METHOD, TASK_METHOD):  # 2025 resource updates go per session; tasks to listen only
            plain: dict[str, Any] | None = None
            for stream in tuple(self._gets.values()):
                if stream.recorded or BROADCAST_MARK not in message:
                    stream.offer(message)
                else:  # a stream the store does not keep (stdio) never sees the broadcast log's mark
                    if plain is None:
                        plain = {k: v for k, v in message.items() if k != BROADCAST_MARK}
                    stream.offer(plain)
        self.hub.deliver(message)

    async def attach_get_stream(
        self,
        tenant_id: str | None,
        session_id: str,
        send: MemoryObjectSendStream[dict[str, Any]],
        close: Callable[[], None],
        *,
        recorded: bool = False,
    ) -> Callable[[], None]:
        """Feed a newly opened 2025 GET stream from the bus (``close`` ends it on overflow);
        ``recorded``: the shared event store keeps it (messages to its session go there).

        Returns:
            ``detach``, to call once when the stream ends.
        """
        await self._ensure_events()
        stream = _GetStream(tenant_id, send, close, recorded)
        self._gets[session_id] = stream
        unsubscribe = await self.bus.subscribe(session_channel(tenant_id, session_id), stream.offer)

        def detach() -> None:
            if self._gets.get(session_id) is stream:
                del self._gets[session_id]
            unsubscribe()

        stream.detach = detach
        return detach

    async def open_listen(
        self, request_id: RequestId, listen_filter: ListenFilter, *, tenant_id: str | None = "default", owner: str | None = None,
        task_owner: str | None = None,
    ) -> ListenStream:  # fmt: skip
        """Open a listen stream of ``tenant_id`` (``owner``: the principal's owner key, None when
        anonymous; ``task_owner``: whose tasks it may hear of) fed from the bus (see
        :meth:`ListenHub.open` for errors)."""
        if not listen_filter.empty:
            await self._ensure_events()
        return self.hub.open(request_id, listen_filter, tenant_id=tenant_id, owner=owner, task_owner=task_owner)

    async def task_changed(self, owner: str, params: dict[str, Any]) -> None:
        """Publish a task's ``notifications/tasks`` (its ``DetailedTask``) to the listen streams of
        every replica that named it and belong to ``owner`` (never to 2025 GET streams)."""
        await self.bus.publish(EVENTS_CHANNEL, {"jsonrpc": "2.0", "method": TASK_METHOD, "params": params, TASK_OWNER_KEY: owner})

    async def session_ended(self, session_id: str) -> None:
        """Forget the resource subscriptions of an ended 2025 session."""
        await self.subscriptions.drop_session(session_id)

    def open_streams(self) -> int:
        """How many listen streams and 2025 GET streams this process holds open."""
        return len(self.hub) + len(self._gets)

    async def aclose(self, grace_seconds: float) -> None:
        """End every listen stream gracefully (waiting at most ``grace_seconds``), end the GET
        streams of this process, and leave the bus."""
        await self.hub.close(grace_seconds)
        for stream in tuple(self._gets.values()):
            stream.close()
            if stream.detach is not None:
                stream.detach()
        if self._events is not None:
            self._events()
            self._events = None
