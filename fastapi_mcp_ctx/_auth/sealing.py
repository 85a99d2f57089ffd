"""Sealed ``requestState``: an AEAD token bound to one caller, one operation and its arguments.

A 2026-07-28 handler that needs more input ends its call with ``input_required`` and an opaque
``requestState`` that the client echoes on its retry (spec 2026-07-28
``server/utilities/multi-round-trip``). The client must not be able to read, forge or move that
state, so it never leaves the server in the clear: :class:`RequestStateSealer` seals the
handler's plain string with AES-256-GCM (``cryptography``) and opens what comes back, before the
handler runs, on whichever replica receives the retry.

Token (base64url, no padding) of ``version (1) | key id (4) | expiry (8, ms since the epoch,
big-endian) | nonce (12) | ciphertext + tag (16)``. The associated data is that header plus the
canonical JSON of the :class:`StateBinding` (tenant, client id, subject, operation, arguments
digest): a state minted for one of these opens for no other. Key ring: the first key seals,
every key opens (rotation); the AEAD key and the key id are derived from each configured secret
with HMAC-SHA256 under labels of their own, so the secret that also signs ``ctx.state`` cursors
is never used twice for one purpose.

Failures of :meth:`RequestStateSealer.open` are all one
:class:`~fastapi_mcp_ctx.errors.InvalidRequestStateError` on the wire; which failure it was
(expired, unknown key, tampered or bound to something else) goes to the server log only.

``cryptography`` is imported on the first seal or open, not at import time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..auth import Principal
from ..backends.memory import MemoryBackend
from ..errors import ConfigurationError, InvalidRequestStateError, RequestStateTooLargeError
from ..settings import McpSettings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "RequestStateSealer",
    "StateBinding",
    "announce_process_key",
    "arguments_digest",
    "request_state_sealer",
    "shared_store_names",
]

logger = logging.getLogger("fastapi_mcp_ctx")

VERSION: Final = 1
_LABEL: Final = b"fastapi-mcp-ctx/request-state/v1"
_HEADER = struct.Struct(">B4sQ12s")  # version, key id, expiry (ms), nonce
_TAG_BYTES: Final = 16
_MIN_TOKEN_BYTES: Final = _HEADER.size + _TAG_BYTES

_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]*")
_process_key: tuple[int, bytes] | None = None  # (pid, key): made at first use, again after a fork
_warned = False  # the no-key warning was logged in this process


def arguments_digest(arguments: Mapping[str, Any] | None) -> str:
    """SHA-256 (hex) of the canonical JSON of a call's arguments, as the client sent them.

    Canonical: keys sorted at every depth, no whitespace, ASCII escapes; nothing is left out, so
    any change of a name, a value or its JSON type (``1`` vs ``1.0`` vs ``"1"``) gives another
    digest. ``None`` (no ``arguments``) digests as ``{}``: the two mean the same call.

    Raises:
        TypeError: a value that is not JSON (never the case for arguments parsed from the wire).
    """
    text = json.dumps({} if arguments is None else arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class StateBinding:
    """What a sealed state is bound to: it opens only for the same five values.

    Attributes:
        tenant_id / client_id / subject: the caller's :class:`~fastapi_mcp_ctx.auth.Principal`
            fields (``None`` for an anonymous caller, or a field the credential lacks).
        operation: the method and the name it addresses, ``"tools/call delete_file"``,
            ``"prompts/get wizard"``, ``"resources/read file:///a.txt"`` (see :meth:`for_call`).
        arguments_digest: :func:`arguments_digest` of the call's arguments (``resources/read``:
            of ``{}``; its URI is in ``operation``).
    """

    tenant_id: str | None
    client_id: str | None
    subject: str | None
    operation: str
    arguments_digest: str

    @classmethod
    def for_call(
        cls,
        principal: Principal | None,
        method: str,
        name: str,
        arguments: Mapping[str, Any] | None = None,
    ) -> StateBinding:
        """The binding of one call: ``principal`` (``ctx.auth``), ``method`` (``tools/call``...),
        ``name`` (tool or prompt name, resource URI) and the arguments as received."""
        return cls(
            tenant_id=principal.tenant_id if principal else None,
            client_id=principal.client_id if principal else None,
            subject=principal.subject if principal else None,
            operation=f"{method} {name}",
            arguments_digest=arguments_digest(arguments),
        )

    def associated_data(self) -> bytes:
        """The canonical bytes authenticated with the token (never sent)."""
        fields = [self.tenant_id, self.client_id, self.subject, self.operation, self.arguments_digest]
        return json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return hmac.new(secret, _LABEL + b"/" + purpose, hashlib.sha256).digest()


def _random_process_key() -> bytes:
    global _process_key
    pid = os.getpid()
    if _process_key is None or _process_key[0] != pid:
        _process_key = (pid, secrets.token_bytes(32))
    return _process_key[1]


class RequestStateSealer:
    """Seals and opens ``requestState`` strings (AES-256-GCM, bound to a :class:`StateBinding`).

    Args:
        keys: secrets of at least 32 bytes (``McpSettings.request_state_keys``): the first seals,
            every one opens. Empty: a random key of this process (states open only here).
        ttl_seconds: a sealed state opens for this many seconds (default 900).
        max_bytes: largest token :meth:`seal` may produce and :meth:`open` will read (bytes).
        clock: wall clock in seconds (``time.time``); injectable for tests.

    Construction does no I/O and imports nothing; ``cryptography`` loads on first use.
    """

    __slots__ = ("_aeads", "_clock", "_kids", "_secrets", "max_bytes", "shared", "ttl_seconds")

    def __init__(
        self,
        keys: Sequence[bytes] = (),
        *,
        ttl_seconds: float = 900.0,
        max_bytes: int = 64 * 1024,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if any(len(key) < 32 for key in keys):
            raise ValueError("request state keys need at least 32 bytes each")
        self.shared = bool(keys)
        """True when the keys were configured (replicas with the same keys open each other's states)."""
        self._secrets: tuple[bytes, ...] = tuple(keys) or (_random_process_key(),)
        self._kids = [_derive(secret, b"kid")[:4] for secret in self._secrets]
        self._aeads: list[AESGCM] | None = None
        self.ttl_seconds = ttl_seconds
        self.max_bytes = max_bytes
        self._clock = clock

    @classmethod
    def from_settings(cls, settings: McpSettings) -> RequestStateSealer:
        """A sealer with ``MCP_REQUEST_STATE_KEY``, ``..._TTL_SECONDS`` and ``..._MAX_BYTES``."""
        return cls(
            settings.request_state_keys,
            ttl_seconds=settings.request_state_ttl_seconds,
            max_bytes=settings.request_state_max_bytes,
        )

    def _ciphers(self) -> list[AESGCM]:
        if self._aeads is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._aeads = [AESGCM(_derive(secret, b"aead")) for secret in self._secrets]
        return self._aeads

    def sealed_size(self, plain: str) -> int:
        """Length in bytes of the token :meth:`seal` makes of ``plain``."""
        raw = _MIN_TOKEN_BYTES + len(plain.encode("utf-8"))
        return (raw * 4 + 2) // 3

    def seal(self, plain: str, binding: StateBinding) -> str:
        """Seal a handler's plain ``requestState`` for the call described by ``binding``.

        Returns:
            a base64url token (ASCII, no padding) valid for ``ttl_seconds``.

        Raises:
            TypeError: ``plain`` is not a ``str``.
            RequestStateTooLargeError: the token would exceed ``max_bytes`` (-32603, HTTP 500).
        """
        if not isinstance(plain, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"requestState must be a str, not {type(plain).__name__}")
        size = self.sealed_size(plain)
        if size > self.max_bytes:
            logger.error(
                "requestState of %s is %d bytes sealed, above MCP_REQUEST_STATE_MAX_BYTES=%d",
                binding.operation,
                size,
                self.max_bytes,
            )
            raise RequestStateTooLargeError(
                f"The request state of this call is {size} bytes sealed, above the server's limit of {self.max_bytes} "
                "(MCP_REQUEST_STATE_MAX_BYTES)"
            )
        expires_ms = int((self._clock() + self.ttl_seconds) * 1000)
        header = _HEADER.pack(VERSION, self._kids[0], expires_ms, secrets.token_bytes(12))
        body = self._ciphers()[0].encrypt(header[-12:], plain.encode("utf-8"), header + binding.associated_data())
        return base64.urlsafe_b64encode(header + body).rstrip(b"=").decode("ascii")

    def open(self, token: str, binding: StateBinding) -> str:
        """The plain state sealed in ``token``, when it was sealed for ``binding`` and is still valid.

        Raises:
            InvalidRequestStateError: not a token, unknown key, tampered, minted for another
                tenant / client / subject / operation / arguments, or expired (-32602,
                ``data.reason = "invalid_request_state"``; the cause is logged at WARNING).
        """
        raw = self._decode(token, binding)
        version, kid, expires_ms, nonce = _HEADER.unpack_from(raw)
        if version != VERSION:
            raise self._refuse(binding, f"unknown token version {version}")
        candidates = [i for i, known in enumerate(self._kids) if hmac.compare_digest(known, kid)]
        if not candidates:
            why = "rotated out, or another deployment's" if self.shared else "MCP_REQUEST_STATE_KEY is unset, so every process has its own key: give every replica the same one"
            raise self._refuse(binding, f"sealed with a key this server does not hold ({why})")
        from cryptography.exceptions import InvalidTag

        header, body, data = raw[: _HEADER.size], raw[_HEADER.size :], b""
        associated = header + binding.associated_data()
        ciphers = self._ciphers()
        for index in candidates:
            try:
                data = ciphers[index].decrypt(nonce, body, associated)
                break
            except InvalidTag:
                continue
        else:
            raise self._refuse(
                binding, "authentication failed: tampered, forged, or minted for another caller, operation or arguments"
            )
        late_ms = int(self._clock() * 1000) - expires_ms
        if late_ms > 0:
            raise self._refuse(binding, f"expired {late_ms / 1000:.1f} s ago")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:  # pragma: no cover - only what seal() encrypted decrypts
            raise self._refuse(binding, "plain state is not UTF-8") from None

    def _decode(self, token: object, binding: StateBinding) -> bytes:
        if not isinstance(token, str):
            raise self._refuse(binding, f"requestState is a {type(token).__name__}, not a string")
        if len(token) > self.max_bytes:
            raise self._refuse(binding, f"{len(token)} bytes, above MCP_REQUEST_STATE_MAX_BYTES={self.max_bytes}")
        if _TOKEN_RE.fullmatch(token) is None:
            raise self._refuse(binding, "not base64url")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise self._refuse(binding, "not base64url") from None
        if len(raw) < _MIN_TOKEN_BYTES:
            raise self._refuse(binding, "too short to be a sealed state")
        return raw

    @staticmethod
    def _refuse(binding: StateBinding, why: str) -> InvalidRequestStateError:
        logger.warning("invalid requestState for %s: %s", binding.operation, why)
        return InvalidRequestStateError()


def shared_store_names(settings: McpSettings, *, state_backend: object, session_store: object = None) -> list[str]:
    """The stores of this router that several replicas share (so a retry may land on another one).

    ``ctx.state`` on Redis or PostgreSQL, and 2025 sessions outside this process
    (``MCP_SESSION_STORE_URL``, or a ``session_store`` that is not the in-memory one). SQLite and
    memory stay on one host or process and are not counted. Names only, never URLs.
    """
    names: list[str] = []
    if not isinstance(state_backend, MemoryBackend) and not getattr(state_backend, "is_sqlite", False):
        names.append(f"ctx.state ({type(state_backend).__name__}, MCP_STORAGE_URL)")
    session_url = getattr(settings, "session_store_url", None)
    if isinstance(session_url, str) and not session_url.startswith("memory:"):
        names.append("sessions (MCP_SESSION_STORE_URL)")
    elif session_store is not None and not type(session_store).__name__.startswith("Memory"):
        names.append(f"sessions ({type(session_store).__name__})")
    return names


def request_state_sealer(settings: McpSettings, *, state_backend: object, session_store: object = None) -> RequestStateSealer:
    """The router's sealer, refusing a configuration where replicas could not open each other's states.

    Args:
        settings: ``request_state_key`` / ``_ttl_seconds`` / ``_max_bytes``.
        state_backend / session_store: the router's stores (see :func:`shared_store_names`).

    Raises:
        ConfigurationError: a store is shared by replicas and ``MCP_REQUEST_STATE_KEY`` is unset;
            the message names the stores and ``fastapi-mcp-ctx keygen``.

    Without a key and without shared stores, states are sealed with a per-process key (nothing
    is wrong with one process; :func:`announce_process_key` says so at the first request), so a
    retry that reaches another replica gets ``invalid_request_state``; ``fastapi-mcp-ctx serve
    --workers N`` refuses it.
    """
    if settings.request_state_key is None:
        shared = shared_store_names(settings, state_backend=state_backend, session_store=session_store)
        if shared:
            raise ConfigurationError(
                f"MCP_REQUEST_STATE_KEY is not set, but {' and '.join(shared)} can be shared by several processes or "
                "replicas, and a 2026 requestState sealed by one of them must open on every other. Set it once, the same "
                "for every process (one process too): export MCP_REQUEST_STATE_KEY=$(fastapi-mcp-ctx keygen)"
            )
    return RequestStateSealer.from_settings(settings)


def announce_process_key(settings: McpSettings) -> None:
    """Log once a process, at INFO, that ``requestState`` is sealed with a random key of this
    process when ``MCP_REQUEST_STATE_KEY`` is unset. Called at the endpoint's first request, once
    the application's logging (or the library's default handler) exists: a notice logged when
    the router is built, at import, reached no handler."""
    global _warned
    if settings.request_state_key is None and not _warned:
        _warned = True
        logger.info(
            "MCP_REQUEST_STATE_KEY is not set: 2026 requestState is sealed with a random key of this process (fine "
            "for one process; with several replicas a retry reaching another one is refused: give every replica the "
            "same key, made by fastapi-mcp-ctx keygen)"
        )
