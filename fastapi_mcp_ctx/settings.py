"""The one settings class: ``McpSettings``, read from ``MCP_*`` environment variables.

Injected through the cached dependency :func:`get_settings`; tests override it with
``app.dependency_overrides[get_settings]`` or pass ``settings=`` to ``McpRouter``.
"""

from __future__ import annotations

import base64
import binascii
import re
from functools import lru_cache
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["McpSettings", "decode_request_state_keys", "get_settings"]

MIN_REQUEST_STATE_KEY_BYTES = 32
"""The shortest key of ``MCP_REQUEST_STATE_KEY`` accepted (decoded bytes); ``keygen`` prints 32 bytes
as 43 base64url characters."""

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
SessionMode = Literal["stateful", "stateless", "auto"]


class McpSettings(BaseSettings):
    """Server settings (env prefix ``MCP_``; e.g. ``MCP_STORAGE_URL=redis://127.0.0.1:6379/0``).

    Attributes:
        server_name / server_version: ``serverInfo`` sent in ``initialize`` / ``server/discover``.
        instructions: optional ``instructions`` for the client.
        path: the MCP endpoint path on the router (default ``/mcp``); must start with ``/``.
        max_body_bytes: largest accepted POST body, in bytes, counted on the bytes read (413 above).
        page_size: items per ``tools/list`` page.
        session_mode: ``stateful`` (2025 sessions with ``Mcp-Session-Id``: a request without
            one is 400), ``stateless`` (no sessions: ``initialize`` issues none, every 2025
            request stands alone, GET/DELETE are 405) or ``auto`` (``initialize`` issues a
            session; a 2025 request carrying its id is served in it, an unknown id is 404, a
            request without one is served alone, as in ``stateless``).
        session_idle_seconds: a 2025 session unused this long (seconds) is ended (404 afterwards).
        max_sessions: open 2025 sessions at most; a new ``initialize`` beyond gets 503.
        allowed_hosts / allowed_origins: DNS-rebinding allow-lists; ``host:*`` admits any port.
            ``None`` means: on for loopback binds (127.0.0.1, localhost, [::1]), off otherwise.
        dns_rebinding_protection: force the Host/Origin check on or off; ``None`` = automatic.
        storage_url: ``ctx.state`` backend: ``memory://``, ``redis://…``, ``sqlite+aiosqlite:///…``,
            ``postgresql+asyncpg://…``.
        storage_create_tables: create SQL tables on first use (only meant for embedded SQLite).
        auth_mode: ``none``, the only value this release accepts (any other value is refused
            when the settings are read, with a message saying what to use instead:
            ``McpRouter(authenticate=...)``).
        request_state_key: server secret; seals 2026 ``requestState`` and signs ``ctx.state`` list
            cursors (so both work on every replica); random per process when unset. Keys of at
            least 32 bytes written as base64url or hex (``fastapi-mcp-ctx keygen``); a comma-
            separated list rotates: the first seals, every one opens (see ``request_state_keys``).
        log_level: floor for both log sinks (server log and ``notifications/message``), and the
            level of the stderr handler the library adds when the application configured none.
        cache_ttl_ms / cache_scope: 2026 cache hints (``ttlMs``, ``cacheScope``) on list results.
        listen_max_streams: open 2026 ``subscriptions/listen`` streams per process at most; one
            more gets HTTP 503 (``-32603``, ``Retry-After``).
        stream_buffer_size: notifications queued for one long-lived stream (a listen stream or
            a 2025 GET stream) at most; a client that falls further behind has its stream ended.
        keepalive_seconds: an idle long-lived stream gets a ``:`` comment after this many seconds.
        http_resumability: 2025 SSE streams of a session are resumable (event ids, stored events,
            ``GET`` + ``Last-Event-ID``; priming events, ``retry`` and ``ctx.close_sse_stream()``
            from 2025-11-25); false: no ids, no priming, nothing stored.
        event_retention_count / event_retention_seconds: events kept per resumable stream at most,
            and for at most this many seconds.
        sse_retry_ms: the ``retry`` (milliseconds) a 2025-11-25 client is told to wait before it
            resumes a stream the server closed.
        shutdown_grace_seconds: once shutdown begins, calls still running get this many seconds
            to finish, then they are cancelled (answered 503, ``Retry-After``).
        shutdown_signals: learn that shutdown began from SIGTERM/SIGINT, chaining the server's own
            handlers (uvicorn, gunicorn, hypercorn); false: call ``mcp_router.begin_shutdown()``.
        body_timeout_seconds: seconds a POST body may take to arrive in full (from the first
            read); past it the answer is 408 (``-32600``, ``Connection: close``) and the
            connection is freed, so a short ``Content-Length`` or an endless chunked body
            cannot pin it.
        expose_stateless_session_id: give ``ctx.session_id`` a fresh random token on each 2025
            request served without a session (it changes on every request; default: None there).
        server_request_timeout_seconds: how long ``ctx.send_request`` waits for the client's
            answer by default (seconds).
        max_client_metadata_bytes: largest ``capabilities`` + ``clientInfo`` of one ``initialize``
            (compact JSON, in bytes) a session keeps; more gets ``-32602`` (HTTP 400).
        max_sessions_per_owner: open 2025 sessions one authenticated owner (the principal's
            ``owner_key``) may hold; one more gets 503 ``reason: too_many_sessions``. ``None``:
            ``max(1, max_sessions // 10)``. Needs ``McpRouter(authenticate=...)``: without it every
            caller is the same anonymous owner, and only ``max_sessions`` applies.
        listen_max_streams_per_owner: open ``subscriptions/listen`` streams per authenticated owner
            in this process; ``None``: ``max(1, listen_max_streams // 10)`` (anonymous callers:
            only ``listen_max_streams``).
        request_state_ttl_seconds: a sealed ``requestState`` is accepted for this many seconds.
        request_state_max_bytes: largest sealed ``requestState`` (bytes of the token sent); a
            handler's state that seals larger is a server error, never truncated.
        input_max_rounds: 2025 era: rounds of server→client requests one call may drive with
            ``ctx.request_input`` (each round asks, then re-enters the handler); one more ends the
            call with ``input_rounds_exceeded``.
    """

    model_config = SettingsConfigDict(env_prefix="MCP_", extra="ignore", hide_input_in_errors=True)  # never echo a secret

    server_name: str = "fastapi-mcp-ctx"
    server_version: str = "0.1.0"
    instructions: str | None = None
    path: str = "/mcp"
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1)
    page_size: int = Field(default=100, ge=1, le=10_000)
    session_mode: SessionMode = "stateful"
    session_idle_seconds: float = Field(default=1800.0, gt=0)
    max_sessions: int = Field(default=10_000, ge=1)
    allowed_hosts: list[str] | None = None
    allowed_origins: list[str] | None = None
    dns_rebinding_protection: bool | None = None
    storage_url: str = "memory://"
    storage_create_tables: bool = False
    auth_mode: Literal["none"] = "none"
    request_state_key: str | None = None
    log_level: LogLevel = "debug"
    cache_ttl_ms: int = Field(default=0, ge=0)
    cache_scope: Literal["public", "private"] = "private"
    body_timeout_seconds: float = Field(default=10.0, gt=0)
    listen_max_streams: int = Field(default=1024, ge=1)
    stream_buffer_size: int = Field(default=1024, ge=1)
    keepalive_seconds: float = Field(default=15.0, gt=0)
    expose_stateless_session_id: bool = False
    server_request_timeout_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    http_resumability: bool = True
    event_retention_count: int = Field(default=1000, ge=1)
    event_retention_seconds: float = Field(default=300.0, gt=0)
    sse_retry_ms: int = Field(default=1000, ge=0, le=86_400_000)
    shutdown_grace_seconds: float = Field(default=3.0, ge=0)
    shutdown_signals: bool = True
    max_client_metadata_bytes: int = Field(default=64 * 1024, ge=2)
    max_sessions_per_owner: int | None = Field(default=None, ge=1)
    listen_max_streams_per_owner: int | None = Field(default=None, ge=1)
    request_state_ttl_seconds: float = Field(default=900.0, gt=0, allow_inf_nan=False)
    request_state_max_bytes: int = Field(default=64 * 1024, ge=256)
    input_max_rounds: int = Field(default=10, ge=1, le=1000)

    @property
    def session_owner_quota(self) -> int:
        """``max_sessions_per_owner``, or its default ``max(1, max_sessions // 10)``."""
        return self.max_sessions_per_owner or max(1, self.max_sessions // 10)

    @property
    def listen_owner_quota(self) -> int:
        """``listen_max_streams_per_owner``, or its default ``max(1, listen_max_streams // 10)``."""
        return self.listen_max_streams_per_owner or max(1, self.listen_max_streams // 10)

    @field_validator("auth_mode", mode="before")
    @classmethod
    def _auth_mode_available(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() != "none":
            raise ValueError(
                f"MCP_AUTH_MODE={value!r} is not available in this release; set MCP_AUTH_MODE=none and pass "
                "McpRouter(authenticate=<a FastAPI dependency returning a Principal>) (docs/guide.md#authentication)"
            )
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("path")
    @classmethod
    def _path_is_absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"MCP_PATH={value!r} must start with '/' (e.g. MCP_PATH=/{value.lstrip('/') or 'mcp'})")
        return value

    @field_validator("request_state_key")
    @classmethod
    def _key_is_long_enough(cls, value: str | None) -> str | None:
        if value is not None:
            decode_request_state_keys(value)
        return value

    @property
    def request_state_keys(self) -> tuple[bytes, ...]:
        """The decoded keys of ``request_state_key`` (first: the sealing key); ``()`` when unset."""
        return () if self.request_state_key is None else decode_request_state_keys(self.request_state_key)


_HEX_RE = re.compile(r"(?:[0-9a-fA-F]{2})+")
_B64URL_RE = re.compile(r"[A-Za-z0-9_-]+={0,2}")


def decode_request_state_keys(value: str) -> tuple[bytes, ...]:
    """Decode ``MCP_REQUEST_STATE_KEY``: comma-separated keys, each hex (when every character is a
    hex digit) or base64url (padding optional), each at least 32 bytes once decoded.

    Raises:
        ValueError: an empty list or entry, an entry in neither form, or one shorter than 32 bytes;
            the message names ``fastapi-mcp-ctx keygen`` and never echoes the key.
    """
    how = (
        f"needs keys of at least {MIN_REQUEST_STATE_KEY_BYTES} bytes written as base64url or hex, separated by commas "
        "(the first seals, all open): set it to the output of `fastapi-mcp-ctx keygen` (the same on every replica), "
        "or unset it for a random per-process key"
    )
    if not value.strip():
        raise ValueError(f"MCP_REQUEST_STATE_KEY is empty; it {how}")
    keys: list[bytes] = []
    for position, entry in enumerate((part.strip() for part in value.split(",")), start=1):
        if _HEX_RE.fullmatch(entry):
            raw = binascii.unhexlify(entry)
        elif _B64URL_RE.fullmatch(entry):
            try:
                raw = base64.urlsafe_b64decode(entry.rstrip("=") + "=" * (-len(entry.rstrip("=")) % 4))
            except (binascii.Error, ValueError):
                raise ValueError(f"MCP_REQUEST_STATE_KEY key {position} is not valid base64url; it {how}") from None
        else:
            shown = "empty" if not entry else "neither base64url nor hex"
            raise ValueError(f"MCP_REQUEST_STATE_KEY key {position} is {shown}; it {how}")
        if len(raw) < MIN_REQUEST_STATE_KEY_BYTES:
            raise ValueError(f"MCP_REQUEST_STATE_KEY key {position} is {len(raw)} bytes; it {how}")
        keys.append(raw)
    return tuple(keys)


@lru_cache(maxsize=1)
def get_settings() -> McpSettings:
    """FastAPI dependency returning the process-wide :class:`McpSettings` (read once, cached)."""
    return McpSettings()
