"""The one settings class: ``McpSettings``, read from ``MCP_*`` environment variables.

Injected through the cached dependency :func:`get_settings`; tests override it with
``app.dependency_overrides[get_settings]`` or pass ``settings=`` to ``McpRouter``.

Not a setting of the server but of the ``fastapi-mcp-ctx stdio`` command: ``MCP_STDIO_HEADER_<NAME>``
variables give the headers of its synthetic requests, one variable per header
(:mod:`fastapi_mcp_ctx._stdio.headers`; ``--header NAME=VALUE`` on the command line).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .errors import ConfigurationError

__all__ = ["McpSettings", "decode_request_state_keys", "get_settings"]

MIN_REQUEST_STATE_KEY_BYTES = 32
"""The shortest key of ``MCP_REQUEST_STATE_KEY`` accepted (decoded bytes); ``keygen`` prints 32 bytes
as 43 base64url characters."""

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
SessionMode = Literal["stateful", "stateless", "auto"]
AuthMode = Literal["none", "jwt", "oauth"]


class McpSettings(BaseSettings):
    """Server settings (env prefix ``MCP_``; e.g. ``MCP_STORAGE_URL=redis://127.0.0.1:6379/0``).

    Attributes:
        server_name / server_version: ``serverInfo`` sent in ``initialize`` / ``server/discover``.
        instructions: optional ``instructions`` for the client.
        path: the MCP endpoint path on the router (default ``/mcp``); must start with ``/``.
        max_body_bytes: largest accepted POST body, in bytes, counted on the bytes read (413 above).
        max_request_header_bytes: largest accepted request header section, in bytes (every
            field's name and value together), checked before any header is read: 431 above
            (uvicorn's httptools parser sets no bound of its own). Applies to POST, GET and DELETE.
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
        storage_url: ``ctx.state`` backend: ``memory://``, ``redis://…``, ``redis+cluster://…``,
            ``redis+sentinel://…``, ``sqlite+aiosqlite:///…``, ``postgresql+asyncpg://…``.
        storage_create_tables: create SQL tables on first use (only meant for embedded SQLite).
        auth_mode: ``none`` (no authentication, remote callers admitted), ``jwt`` (bearer JWTs
            verified against ``jwt_jwks_url`` or, in development, ``jwt_secret``), ``oauth``
            (like ``jwt``, the JWKS found through ``oauth_issuer``'s metadata, RFC 8414 / OpenID
            discovery). Unset (None): secure by default, only local requests are served (loopback
            peer, no header a proxy adds: ``Forwarded``, ``X-Forwarded-*``, ``X-Real-IP``, ``Via``…);
            others get 403 naming MCP_AUTH_MODE, whatever FastAPI dependency the route has.
            ``McpRouter(authenticate=...)`` wins over it. See docs/auth.md.
        request_state_key: server secret; seals 2026 ``requestState`` and signs ``ctx.state`` list
            cursors (so both work on every replica); random per process when unset. Keys of at
            least 32 bytes written as base64url or hex (``fastapi-mcp-ctx keygen``); a comma-
            separated list rotates: the first seals, every one opens (see ``request_state_keys``).
        log_level: floor for both log sinks (server log and ``notifications/message``), and the
            level of the stderr handler the library adds when the application configured none (default
            ``info``: ``ctx.log.debug`` reaches neither sink until it is lowered).
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
        session_store_url: where 2025 sessions, the SSE event log and the replica bus live:
            ``memory://`` (this process) or ``redis://host:port/db`` / ``rediss://…``,
            ``redis+cluster://host:port[,host:port…]`` (a Redis Cluster),
            ``redis+sentinel://host:port[,…]/master-name/db`` (behind Sentinel), shared by every
            replica; needs the ``redis`` extra. See docs/deployment.md "Redis Cluster and Sentinel".
        session_store_namespace: prefix of every Redis key and channel of the session store.
        session_lease_seconds: a replica's hold on a session's GET stream lasts this long
            (seconds) without renewal, so after a replica dies its sessions' GET streams can be
            reopened elsewhere (409 meanwhile) at most this much later; likewise a replica's
            lease on each 2025 call it streams: a resumed stream of a call whose replica died
            gets ``call_lost`` and ends about this long after the replica's last renewal.
        jwt_jwks_url: the identity provider's JWKS (https, or http on loopback); keys are cached
            ``jwt_jwks_cache_seconds`` (then refreshed in the background while they keep serving),
            refetched for an unknown ``kid`` at most once per ``jwt_jwks_refetch_seconds`` and kid shape, and kept
            while the provider is unreachable.
        jwt_issuer: the exact ``iss`` tokens must carry (default under ``oauth``: ``oauth_issuer``).
        jwt_audience: accepted ``aud`` values, one or more (``a,b`` or a JSON list); default
            ``[resource_url]``.
        jwt_algorithms: allowed ``alg`` values; default RS256/PS256/ES256/EdDSA family with a JWKS,
            HS256 with ``jwt_secret``; ``none`` is never accepted, HMAC never beside a JWKS.
        jwt_leeway: clock skew tolerated on ``exp`` / ``nbf`` / ``iat`` (seconds, at most 300).
        jwt_tenant_claim: the claim giving ``ctx.tenant_id`` (default ``tid``).
        jwt_secret: an HS256 key for development only (at least 32 bytes; a warning is logged).
        jwt_jwks_cache_seconds / jwt_jwks_refetch_seconds: see ``jwt_jwks_url`` (seconds).
        jwt_max_token_bytes: longest bearer token accepted, in bytes; a longer one is refused
            (401 ``invalid_token``) before any of it is decoded.
        resource_url: the canonical URL of this MCP endpoint (``https://mcp.example.com/mcp``), the
            ``resource`` of the RFC 9728 metadata and the default audience; never derived from
            ``Host``. Required under ``jwt`` / ``oauth``.
        oauth_issuer: the authorization server whose RFC 8414 / OpenID metadata gives the JWKS.
        hide_unauthorized_tools: ``tools/list`` omits tools whose ``scopes=`` the caller lacks.
        telemetry: OpenTelemetry spans and metrics: ``auto`` (on when the application configured
            an OpenTelemetry SDK provider), ``on``, ``off``. telemetry_handler_span: a child span
            around the handler itself.
        telemetry_payload_metrics: record the ``mcp.server.request.size`` / ``response.size``
            histograms (two more measurements per request; off by default).
        telemetry_detail: the span and duration-metric attributes: ``required`` (the semantic
            convention's required ones), ``standard`` (default: + protocol version, operation
            name, session id, ``network.*``), ``recommended`` (+ ``client.address`` / ``client.port``
            on the span). See docs/telemetry.md.
        jwt_cache_seconds: how long a verified token is remembered (seconds, never beyond its
            ``exp``); 0 verifies every request in full.
        gc_freeze: at the router's first request (after any fork), ``gc.collect()`` then
            ``gc.freeze()``: full garbage collections walk only what requests made, not the
            application's start-up objects (worth it with Redis sessions, where requests wait
            mid-flight: ``fastapi_mcp_ctx/_server/gcfreeze.py``). Process-wide; off by default.
        max_batch_size: messages one JSON-RPC batch (a POST body that is an array, served in
            sessions negotiated at 2025-03-26 only) may hold; a larger one is refused whole
            (-32600, HTTP 400). ``max_body_bytes`` bounds its bytes as for any body.
        session_store_deadline_seconds: the one deadline (seconds, 0.05 to 60) of the session-store
            and bus work an HTTP request does before its handler runs (session lookup or creation,
            an answer or cancellation forwarded to another replica, a DELETE's teardown, a GET
            stream's lease), counted from its first such operation; a Redis that has not answered
            by then (paused, overloaded) gets the request one 503 + ``Retry-After``. Redis stores only.
        task_ttl_ms: how long a task's record (status, then result or error) is kept after its
            creation (integer milliseconds), unless the 2025 client asks another ``task.ttl``;
            then it is deleted and ``tasks/get`` answers -32602 (docs/tasks.md).
        task_min_ttl_ms / task_max_ttl_ms: the range (milliseconds) a 2025 client's requested
            ``task.ttl`` must fall in; outside it the ``tools/call`` gets -32602 naming the range.
        task_poll_interval_ms: the ``pollIntervalMs`` suggested to clients (milliseconds).
        task_lease_seconds: the replica running a task renews its lease on it every third of this
            (seconds); a task whose replica stopped renewing (killed, partitioned) reads ``failed``
            (``reason: task_lost``) at most this long after the last renewal.
        max_tasks_per_owner: stored tasks (running or finished, until their TTL) one owner (tenant
            + subject, + session for an anonymous 2025 caller) may hold; one more gets -32600
            (HTTP 429, ``reason: task_quota_exceeded``).
        task_max_result_bytes: largest result or error a task may store (bytes of compact JSON);
            a larger one ends the task ``failed`` with ``reason: task_result_too_large``.
        debug: development mode (also on for an app made with ``FastAPI(debug=True)``): a tool's
            result carries, as its last text block, the report of a programming mistake the server
            log gets in every mode (a Context coroutine never awaited, ``ctx.log.info(...)``
            without ``await``). Keep it off in production: the text names source files.
    """

    model_config = SettingsConfigDict(env_prefix="MCP_", extra="ignore", hide_input_in_errors=True)  # never echo a secret

    server_name: str = "fastapi-mcp-ctx"
    server_version: str = "0.1.0"
    instructions: str | None = None
    path: str = "/mcp"
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1, le=1 << 30)
    max_request_header_bytes: int = Field(default=32 * 1024, ge=1024, le=16 * 1024 * 1024)
    page_size: int = Field(default=100, ge=1, le=10_000)
    session_mode: SessionMode = "stateful"
    session_idle_seconds: float = Field(default=1800.0, gt=0, le=31_536_000, allow_inf_nan=False)
    max_sessions: int = Field(default=10_000, ge=1, le=10_000_000)
    allowed_hosts: Annotated[list[str] | None, NoDecode] = None
    allowed_origins: Annotated[list[str] | None, NoDecode] = None
    dns_rebinding_protection: bool | None = None
    storage_url: str = "memory://"
    storage_create_tables: bool = False
    auth_mode: AuthMode | None = None
    request_state_key: str | None = None
    log_level: LogLevel = "info"
    cache_ttl_ms: int = Field(default=0, ge=0, le=31_536_000_000)
    cache_scope: Literal["public", "private"] = "private"
    body_timeout_seconds: float = Field(default=10.0, gt=0, le=3600, allow_inf_nan=False)
    listen_max_streams: int = Field(default=1024, ge=1, le=1_000_000)
    stream_buffer_size: int = Field(default=1024, ge=1, le=1_000_000)
    keepalive_seconds: float = Field(default=15.0, gt=0, le=3600, allow_inf_nan=False)
    expose_stateless_session_id: bool = False
    server_request_timeout_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False, le=86_400)
    http_resumability: bool = True
    event_retention_count: int = Field(default=1000, ge=1, le=10_000_000)
    event_retention_seconds: float = Field(default=300.0, gt=0, le=31_536_000, allow_inf_nan=False)
    sse_retry_ms: int = Field(default=1000, ge=0, le=86_400_000)
    shutdown_grace_seconds: float = Field(default=3.0, ge=0, le=3600, allow_inf_nan=False)
    shutdown_signals: bool = True
    max_client_metadata_bytes: int = Field(default=64 * 1024, ge=2, le=16 * 1024 * 1024)
    max_sessions_per_owner: int | None = Field(default=None, ge=1, le=10_000_000)
    listen_max_streams_per_owner: int | None = Field(default=None, ge=1, le=1_000_000)
    request_state_ttl_seconds: float = Field(default=900.0, gt=0, allow_inf_nan=False, le=31_536_000)
    request_state_max_bytes: int = Field(default=64 * 1024, ge=256, le=16 * 1024 * 1024)
    input_max_rounds: int = Field(default=10, ge=1, le=1000)
    session_store_url: str = "memory://"
    session_store_namespace: str = "mcp:"
    session_lease_seconds: float = Field(default=10.0, gt=0, allow_inf_nan=False, le=3600)
    jwt_jwks_url: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: Annotated[list[str] | None, NoDecode] = None
    jwt_algorithms: Annotated[list[str] | None, NoDecode] = None
    jwt_leeway: float = Field(default=30.0, ge=0, le=300, allow_inf_nan=False)
    jwt_tenant_claim: str = Field(default="tid", min_length=1)
    jwt_secret: str | None = Field(default=None, repr=False)
    jwt_jwks_cache_seconds: float = Field(default=300.0, gt=0, le=2_592_000, allow_inf_nan=False)
    jwt_jwks_refetch_seconds: float = Field(default=30.0, ge=0, le=86_400, allow_inf_nan=False)
    jwt_max_token_bytes: int = Field(default=16 * 1024, ge=256, le=1024 * 1024)
    resource_url: str | None = None
    oauth_issuer: str | None = None
    hide_unauthorized_tools: bool = True
    telemetry: Literal["auto", "on", "off"] = "auto"
    telemetry_handler_span: bool = False
    jwt_cache_seconds: float = Field(default=60.0, ge=0, le=3600, allow_inf_nan=False)
    telemetry_payload_metrics: bool = False
    gc_freeze: bool = False
    telemetry_detail: Literal["required", "standard", "recommended"] = "standard"
    max_batch_size: int = Field(default=100, ge=1, le=10_000)
    session_store_deadline_seconds: float = Field(default=2.0, ge=0.05, le=60, allow_inf_nan=False)
    debug: bool = False
    task_ttl_ms: int = Field(default=3_600_000, ge=1000, le=31_536_000_000)
    task_min_ttl_ms: int = Field(default=1000, ge=1, le=31_536_000_000)
    task_max_ttl_ms: int = Field(default=86_400_000, ge=1000, le=31_536_000_000)
    task_poll_interval_ms: int = Field(default=1000, ge=1, le=3_600_000)
    task_lease_seconds: float = Field(default=15.0, ge=0.3, le=3600, allow_inf_nan=False)
    max_tasks_per_owner: int = Field(default=1000, ge=1, le=10_000_000)
    task_max_result_bytes: int = Field(default=1024 * 1024, ge=1024, le=256 * 1024 * 1024)

    @property
    def session_owner_quota(self) -> int:
        """``max_sessions_per_owner``, or its default ``max(1, max_sessions // 10)``."""
        return self.max_sessions_per_owner or max(1, self.max_sessions // 10)

    @property
    def listen_owner_quota(self) -> int:
        """``listen_max_streams_per_owner``, or its default ``max(1, listen_max_streams // 10)``."""
        return self.listen_max_streams_per_owner or max(1, self.listen_max_streams // 10)

    @field_validator("session_mode", "log_level", "cache_scope", "telemetry", "telemetry_detail", mode="before")
    @classmethod
    def _word_in_any_case(cls, value: object) -> object:
        """``MCP_LOG_LEVEL=INFO`` is ``info``: every word-valued setting ignores case and spaces."""
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("auth_mode", mode="before")
    @classmethod
    def _auth_mode_known(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().lower()
            if value not in ("none", "jwt", "oauth"):
                raise ValueError(f"MCP_AUTH_MODE={value!r}: use none, jwt or oauth (docs/auth.md)")
        return value

    @field_validator("jwt_audience", "jwt_algorithms", "allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):  # MCP_ALLOWED_HOSTS=a,b or a JSON list
            text = value.strip()
            if text[:1] in ("{", '"'):
                raise ValueError("takes a comma-separated list (a,b) or a JSON list ([\"a\", \"b\"])")
            return json.loads(text) if text.startswith("[") else [part.strip() for part in text.split(",") if part.strip()]
        return value

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


def describe_invalid_settings(error: ValidationError) -> str:
    """One line per refused ``MCP_*`` variable: its name and what it accepts, never its value
    (a secret such as ``MCP_JWT_SECRET`` must not reach a log)."""
    lines: list[str] = []
    for item in error.errors(include_url=False, include_input=False):
        field = str(item["loc"][0]) if item["loc"] else ""
        name = f"MCP_{field.upper()}" if field else "MCP_*"
        message = str(item["msg"]).removeprefix("Value error, ")
        lines.append(message if message.startswith(name) else f"{name}: {message}")
    return "Invalid settings: " + "; ".join(lines)


@lru_cache(maxsize=1)
def get_settings() -> McpSettings:
    """FastAPI dependency returning the process-wide :class:`McpSettings` (read once, cached).

    Raises:
        ConfigurationError: an ``MCP_*`` environment variable (or ``.env`` entry) holds a value its
            setting refuses; the message names every such variable and what it accepts.
    """
    try:
        return McpSettings()
    except ValidationError as exc:
        raise ConfigurationError(describe_invalid_settings(exc)) from None
