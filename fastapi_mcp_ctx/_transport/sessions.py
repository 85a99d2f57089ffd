"""2025-era sessions (``Mcp-Session-Id``) behind a small store interface.

A :class:`SessionRecord` holds only what a shared store can keep (JSON-able: negotiated
version, client capabilities and info, log level, owner), in a :class:`SessionStore` (in this
process: ``_transport.memory_sessions``; shared: ``_replicas.redis_sessions``); live, in-process
objects (the standalone GET stream, in-flight cancellation signals) live in :class:`LiveSessions`.
Spec 2025-11-25 ``basic/transports`` §Session Management: ids are cryptographically random
visible ASCII; an ended or unknown id gets 404.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._context.cancel_signal import CancelSignal
from ..errors import InvalidParamsError
from .client_metadata import HOT_MAX_BYTES, encode_metadata, keep_hot, parse_metadata

__all__ = [
    "LiveSession",
    "LiveSessions",
    "OwnerQuotaExceeded",
    "SessionRecord",
    "SessionStore",
    "check_client_metadata",
    "check_initialize_params",
    "new_session_id",
]

class OwnerQuotaExceeded(OverflowError):
    """Raised by :meth:`SessionStore.create` when the record's owner holds its quota of sessions."""

    def __init__(self, owner: str, limit: int) -> None:
        super().__init__(f"Too many open sessions for this caller (owner {owner!r} holds its quota of {limit})")
        self.owner = owner
        self.limit = limit


def check_client_metadata(params: dict[str, Any], max_bytes: int) -> None:
    """Refuse ``initialize`` params whose ``capabilities`` + ``clientInfo`` would make a session
    keep more than ``max_bytes`` bytes (measured as compact JSON of both together).

    Raises:
        InvalidParamsError: over the limit (``-32602``, HTTP 400), naming the limit and the setting.
    """
    size = len(encode_metadata(params.get("capabilities"), params.get("clientInfo")))  # pyright: ignore[reportArgumentType]
    if size > max_bytes:
        raise InvalidParamsError(
            f"initialize: capabilities and clientInfo take {size} bytes of JSON; a session keeps at most "
            f"{max_bytes} (MCP_MAX_CLIENT_METADATA_BYTES)"
        )


def new_session_id() -> str:
    """A fresh session id: 32 lowercase hex characters from ``secrets`` (128 bits)."""
    return secrets.token_hex(16)


class SessionRecord:
    """What a 2025 session remembers between requests (all JSON-able).

    Attributes:
        id: the ``Mcp-Session-Id``.
        protocol_version: negotiated in ``initialize``.
        client_capabilities / client_info: from ``initialize`` params (read-only properties).
        client_metadata: both as the compact JSON bytes :func:`encode_metadata` makes (what
            ``MCP_MAX_CLIENT_METADATA_BYTES`` measures).
        log_level: set by ``logging/setLevel`` (None: every level).
        owner: the authenticated principal the session is bound to (None without auth).
        created_at / last_seen: UNIX times in seconds.

    A record built from parsed objects (a shared store's, read for one request) keeps them; a
    :meth:`compact` one (what ``_transport.memory_sessions.MemorySessionStore`` holds) keeps the bytes, parses them on
    use and keeps the parsed form while it is among the hot ones (``_transport/client_metadata.py``:
    parsed objects take about 8x their JSON, so only a bounded number of records hold them).
    """

    __slots__ = ("_metadata", "_parsed", "created_at", "id", "last_seen", "log_level", "owner", "protocol_version")

    def __init__(
        self,
        id: str,  # noqa: A002 - the spec's name for it
        protocol_version: str,
        client_capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
        log_level: str | None = None,
        owner: str | None = None,
        created_at: float | None = None,
        last_seen: float | None = None,
        *,
        client_metadata: bytes | None = None,
    ) -> None:
        self.id = id
        self.protocol_version = protocol_version
        self.log_level = log_level
        self.owner = owner
        now = time.time()
        self.created_at = now if created_at is None else created_at
        self.last_seen = now if last_seen is None else last_seen
        self._metadata = client_metadata
        self._parsed: tuple[dict[str, Any], dict[str, Any] | None] | None = (
            None if client_metadata is not None else ({} if client_capabilities is None else client_capabilities, client_info)
        )

    @classmethod
    def from_initialize(cls, params: dict[str, Any], protocol_version: str, owner: str | None = None) -> SessionRecord:
        """A new, compact session (fresh id) for ``initialize`` params: ``capabilities`` and
        ``clientInfo`` kept (as JSON bytes) when they are objects."""
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        metadata = encode_metadata(
            capabilities if isinstance(capabilities, dict) else {},  # pyright: ignore[reportUnknownArgumentType]
            client_info if isinstance(client_info, dict) else None,  # pyright: ignore[reportUnknownArgumentType]
        )
        return cls(id=new_session_id(), owner=owner, protocol_version=protocol_version, client_metadata=metadata)

    def client_metadata_parsed(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """``(client_capabilities, client_info)`` in one parse (none while the record is hot): read, never mutate."""
        parsed = self._parsed  # a record built parsed, or a compact one while hot
        if parsed is not None:
            return parsed
        return self._parse()

    def _parse(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        raw = self._metadata
        assert raw is not None
        parsed = parse_metadata(raw)
        if len(raw) <= HOT_MAX_BYTES:  # small: kept while hot (client_metadata.keep_hot)
            self._parsed = parsed
            keep_hot(self.id, self)
        return parsed

    def forget_parsed(self) -> None:
        """Out of the hot ones: a compact record drops its parsed form (parsed again on use)."""
        if self._metadata is not None:
            self._parsed = None

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """``ClientCapabilities`` from ``initialize`` (``{}`` when none): read, never mutate."""
        return self.client_metadata_parsed()[0]

    @property
    def client_info(self) -> dict[str, Any] | None:
        """``clientInfo`` (``Implementation``) from ``initialize``, or None: read, never mutate."""
        return self.client_metadata_parsed()[1]

    @property
    def client_metadata(self) -> bytes:
        """Capabilities and client info as compact JSON bytes (:func:`encode_metadata`)."""
        if self._metadata is not None:
            return self._metadata
        assert self._parsed is not None
        return encode_metadata(*self._parsed)

    def compact(self) -> SessionRecord:
        """This record keeping its client metadata as JSON bytes only (parsed objects dropped);
        returns ``self``."""
        if self._metadata is None:
            self._metadata = self.client_metadata
        self._parsed = None
        return self

    def __repr__(self) -> str:
        return (
            f"SessionRecord(id={self.id!r}, protocol_version={self.protocol_version!r}, owner={self.owner!r}, "
            f"log_level={self.log_level!r}, metadata={len(self.client_metadata)} bytes)"
        )


class SessionStore(Protocol):
    """Where session records live. Implementations must be safe under concurrency."""

    async def create(self, record: SessionRecord) -> None:
        """Store a new record. Raises ``OverflowError`` when the store is full
        (:class:`OwnerQuotaExceeded` when only the record's owner is at its quota)."""
        ...

    async def get(self, session_id: str) -> SessionRecord | None:
        """The live record (refreshing its idle timer), or None when unknown or expired."""
        ...

    async def update(self, record: SessionRecord) -> None:
        """Persist changed fields of a record (e.g. ``log_level``)."""
        ...

    async def delete(self, session_id: str) -> bool:
        """End a session; False when it was unknown."""
        ...


class LiveSession:
    """In-process companions of a session: the standalone stream and in-flight calls (one is
    made for each call of a session with nothing else live: a plain class, no dataclass
    ``__init__`` with its default factory)."""

    __slots__ = ("in_flight", "standalone_receive", "standalone_send")

    def __init__(self) -> None:
        self.standalone_send: MemoryObjectSendStream[dict[str, Any]] | None = None
        self.standalone_receive: MemoryObjectReceiveStream[dict[str, Any]] | None = None
        self.in_flight: dict[str | int, CancelSignal] = {}

    def open_standalone(self, max_buffer: int = 1024) -> MemoryObjectReceiveStream[dict[str, Any]] | None:
        """Open the GET stream (queueing ``max_buffer`` messages at most); None when one is
        already open (HTTP 409)."""
        if self.standalone_send is not None:
            return None
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](max_buffer_size=max_buffer)
        self.standalone_send, self.standalone_receive = send, receive
        return receive

    def close_standalone(self) -> None:
        """Close the GET stream (its response ends)."""
        if self.standalone_send is not None:
            self.standalone_send.close()
        self.standalone_send = self.standalone_receive = None


class LiveSessions:
    """Map of session id → :class:`LiveSession` for this process."""

    def __init__(self) -> None:
        self._live: dict[str, LiveSession] = {}

    def streaming(self, session_id: str) -> bool:
        """True while ``session_id``'s GET stream is open in this process."""
        live = self._live.get(session_id)
        return live is not None and live.standalone_send is not None

    def get(self, session_id: str) -> LiveSession:
        """The live companion of ``session_id`` (created on first use)."""
        live = self._live.get(session_id)
        if live is None:
            live = self._live[session_id] = LiveSession()
        return live

    def call_started(self, session_id: str, request_id: str | int, signal: CancelSignal) -> LiveSession | None:
        """Register a call of ``session_id`` in its companion's ``in_flight`` under ``request_id``
        (the companion made on first use) and return the companion; None, and nothing
        registered, when ``request_id`` is in flight in this session already. Call
        :meth:`call_ended` with the companion once the call ended."""
        live = self._live.get(session_id)
        if live is None:
            live = self._live[session_id] = LiveSession()
        elif request_id in live.in_flight:
            return None
        live.in_flight[request_id] = signal
        return live

    def release(self, session_id: str) -> None:
        """Drop the companion of ``session_id`` when nothing is live in it any more."""
        live = self._live.get(session_id)
        if live is not None and not live.in_flight and live.standalone_send is None:
            del self._live[session_id]

    def call_ended(self, live: LiveSession, session_id: str, request_id: str | int, signal: CancelSignal) -> None:
        """A call of ``session_id`` registered in ``live.in_flight`` under ``request_id`` with
        ``signal`` ended: its entry goes (when it is still this call's), then :meth:`release`."""
        in_flight = live.in_flight
        if in_flight.get(request_id) is signal:
            del in_flight[request_id]
        if not in_flight and live.standalone_send is None and self._live.get(session_id) is live:
            del self._live[session_id]  # the common end: the call's own companion, now empty
            return
        current = self._live.get(session_id)
        if current is not None and not current.in_flight and current.standalone_send is None:
            del self._live[session_id]

    def end(self, session_id: str) -> None:
        """Forget a session: close its stream, cancel its in-flight calls."""
        live = self._live.pop(session_id, None)
        if live is None:
            return
        live.close_standalone()
        for signal in live.in_flight.values():
            signal.cancel("session ended")


def check_initialize_params(params: Mapping[str, Any]) -> None:
    """The required members of ``InitializeRequestParams``, with their JSON types.

    Raises:
        InvalidParamsError: ``protocolVersion`` not a string, ``capabilities`` not an object,
            ``clientInfo`` not an object with a string ``name`` (and ``version``) (-32602).
    """
    if not isinstance(params.get("protocolVersion"), str):
        raise InvalidParamsError("initialize requires a string 'protocolVersion'")
    if not isinstance(params.get("capabilities"), dict):
        raise InvalidParamsError("initialize requires a 'capabilities' object")
    info = params.get("clientInfo")
    if not isinstance(info, dict):
        raise InvalidParamsError("initialize requires a 'clientInfo' object")
    client: dict[str, Any] = info  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(client.get("name"), str) or not isinstance(client.get("version", ""), str):
        raise InvalidParamsError("initialize 'clientInfo' needs a string 'name' (and 'version')")
