"""``ctx.state``: tenant-scoped key-value storage for handlers, over any :class:`StateBackend`.

Tenant scoping happens here and only here: every key becomes ``t/<tenant>/<key>`` with
the tenant percent-encoded (no ``/`` survives), so no key, prefix or cursor of one tenant
can name another tenant's data. Keys follow one grammar on every call (batch keys and
``list`` prefixes included): ``^[a-zA-Z0-9_.\\-/]+$``, at most 1024 characters, no ``..``.

Values are stored as JSON text, on every backend (memory included): a read returns the
JSON form (a ``datetime`` comes back as its ISO string, a tuple as a list, a pydantic model
as a dict) and never an object shared with the caller. A value that is not JSON
(``bytes``, a cycle, a function, ``NaN``/``inf``) raises :class:`SerializationError`
before anything is written (the codec: ``_state_values.py``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast, overload
from urllib.parse import quote

from pydantic import TypeAdapter

from ._bridge import LoopOwner, bridged
from ._state_values import decode_value, encode_value, load_value
from .backends.base import StateBackend
from .errors import (
    InvalidCursorError,
    SerializationError,
    TenantRequiredError,
    ValidationError,
)

__all__ = ["ContextState", "StateItem", "StatePage", "clear_state", "derive_cursor_key", "reserved_space", "state_prefix"]

T = TypeVar("T")

MAX_KEY_LENGTH = 1024
MAX_LIST_LIMIT = 1000
_KEY_RE = re.compile(r"[a-zA-Z0-9_.\-/]+")
_NS_ROOT = "t/"
_PROCESS_CURSOR_KEY = secrets.token_bytes(32)


def state_prefix(tenant_id: str | None = None) -> str:
    """The backend key prefix under which ``ctx.state`` stores one tenant's keys.

    ``state_prefix("acme")`` is ``"t/acme/"`` (the tenant percent-encoded, so no ``/``
    survives); ``state_prefix()`` is ``"t/"``, the prefix of every tenant's keys.
    """
    return _NS_ROOT if tenant_id is None else f"{_NS_ROOT}{quote(tenant_id, safe='')}/"


async def clear_state(backend: StateBackend, tenant_id: str | None = None) -> int:
    """Delete every ``ctx.state`` key of one tenant, or of every tenant (``None``), from ``backend``.

    Pages through :meth:`StateBackend.scan` (500 keys a page) and deletes each page; not atomic
    with concurrent writers. Returns the number of live keys deleted.

    Raises:
        StateUnavailableError: the backend cannot be reached.
    """
    prefix, removed, after = state_prefix(tenant_id), 0, None
    while rows := await backend.scan(prefix, after, 500):
        removed += await backend.delete_many([key for key, _ in rows])
        after = rows[-1][0]
    return removed


def derive_cursor_key(secret: str | bytes | None) -> bytes:
    """The HMAC key that signs ``list`` cursors.

    Args:
        secret: a deployment secret shared by every replica (e.g.
            ``McpSettings.request_state_key``); ``None`` gives the per-process random key,
            so a cursor only works on the process that issued it.

    Returns:
        32 bytes, domain-separated from any other use of ``secret``.
    """
    if secret is None:
        return _PROCESS_CURSOR_KEY
    raw = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(raw, b"fastapi-mcp-ctx/state-cursor/v1", hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class StateItem:
    """One entry of a :class:`StatePage`: the key (without tenant) and its JSON value."""

    key: str
    value: Any


@dataclass(frozen=True, slots=True)
class StatePage:
    """A page of :meth:`ContextState.list`.

    Attributes:
        items: entries in ascending key order (byte order).
        next_cursor: opaque string for the next page; ``None`` on the last page.
    """

    items: list[StateItem] = field(default_factory=lambda: [])
    next_cursor: str | None = None


def _dumps(key: str, value: Any) -> str:
    try:
        return encode_value(value)
    except (TypeError, ValueError, RecursionError, OverflowError) as exc:
        raise SerializationError(f"Value for key {key!r} is not JSON-serializable: {exc}") from exc


# ------------------------------------------------------------------------ validation
def _bad_key(key: object, what: str = "key") -> ValidationError:
    shown = repr(key) if len(repr(key)) <= 80 else repr(key)[:77] + "..."
    return ValidationError(
        f"Invalid {what} {shown}: use 1-{MAX_KEY_LENGTH} characters of [a-zA-Z0-9_.-/], without '..'"
    )


def _check_key(key: object) -> str:
    if type(key) is not str or len(key) > MAX_KEY_LENGTH or ".." in key or _KEY_RE.fullmatch(key) is None:
        raise _bad_key(key)
    return key


def _check_ttl(ttl: float | None) -> float | None:
    raw = cast(object, ttl)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) or raw <= 0:
        raise ValidationError(f"Invalid ttl {ttl!r}: seconds, a finite number > 0, or None")
    return float(raw)


def _check_keys(keys: Sequence[str]) -> list[str]:
    if isinstance(keys, (str, bytes)):
        raise ValidationError("Expected a sequence of keys, got a single string")
    return [_check_key(k) for k in keys]


def _b64e(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# ----------------------------------------------------------------------------- facade
class ContextState:
    """Tenant-scoped JSON key-value storage (``ctx.state``).

    Args:
        backend: the shared :class:`~fastapi_mcp_ctx.backends.StateBackend`.
        tenant_id: the caller's tenant. ``None`` (or ``""``) means an authenticated caller
            without a tenant claim: every method then raises :class:`TenantRequiredError`
            (fail closed: callers without a tenant must not share one namespace).
        cursor_key: HMAC key for ``list`` cursors (see :func:`derive_cursor_key`); the
            per-process random key by default.

    Every method raises:
        TenantRequiredError: no tenant.
        ValidationError: a key or prefix outside the grammar, a bad ``ttl`` or ``limit``.
        StateUnavailableError: the backend cannot be reached (retryable; nothing is
            half-written by a batch).

    Construction does no I/O; one instance per request is cheap.
    """

    __slots__ = ("_backend", "_call", "_cursor_key", "_ns", "_tenant")

    def __init__(self, backend: StateBackend, tenant_id: str | None, *, cursor_key: bytes | None = None) -> None:
        self._backend = backend
        self._tenant = tenant_id or None
        self._ns = state_prefix(tenant_id) if tenant_id else None
        self._cursor_key = cursor_key if cursor_key is not None else _PROCESS_CURSOR_KEY
        self._call: LoopOwner | None = None  # set by ctx.state: sync callers run on this call's loop (_bridge)

    @property
    def tenant_id(self) -> str | None:
        """The tenant this view is scoped to (``None``: every call fails closed)."""
        return self._tenant

    def _namespace(self) -> str:
        ns = self._ns
        if ns is None:
            raise TenantRequiredError()
        return ns

    # ---------------------------------------------------------------- single key
    @overload
    async def get(self, key: str) -> Any: ...
    @overload
    async def get(self, key: str, model: type[T] | TypeAdapter[T]) -> T | None: ...

    @bridged("ctx.state.get")
    async def get(self, key: str, model: type[Any] | TypeAdapter[Any] | None = None) -> Any:
        """The JSON value stored under ``key``, or ``None`` when absent or expired.

        Args:
            key: a key in the grammar.
            model: optional pydantic model class, type (``list[int]``) or ``TypeAdapter``;
                the stored JSON is validated into it (match the stored JSON form: ``str``
                for a datetime written earlier is fine, pydantic parses ISO strings).

        Raises:
            pydantic.ValidationError: the stored value does not fit ``model``.
        """
        ns = self._namespace()
        text = await self._backend.get(ns + _check_key(key))
        if text is None:
            return None
        return load_value(text, model)

    @bridged("ctx.state.set")
    async def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Store ``value`` (any JSON-serializable value) under ``key``.

        Args:
            ttl: seconds until the value expires (``float > 0``); ``None`` keeps it until deleted.
                Replacing a value replaces its TTL.

        Raises:
            SerializationError: ``value`` is not JSON (nothing written).
        """
        ns = self._namespace()
        full = ns + _check_key(key)
        ttl = _check_ttl(ttl)
        await self._backend.set(full, _dumps(key, value), ttl)

    @bridged("ctx.state.delete")
    async def delete(self, key: str) -> bool:
        """Remove ``key``; True when a live value was removed, False when there was none."""
        ns = self._namespace()
        return await self._backend.delete(ns + _check_key(key))

    @overload
    async def take(self, key: str) -> Any: ...
    @overload
    async def take(self, key: str, model: type[T] | TypeAdapter[T]) -> T | None: ...

    @bridged("ctx.state.take")
    async def take(self, key: str, model: type[Any] | TypeAdapter[Any] | None = None) -> Any:
        """Atomically read and delete ``key``; ``None`` when absent.

        Of any number of concurrent ``take`` calls on one key (across processes sharing the
        backend) exactly one receives the value: use it to redeem single-use records
        (consent ids, one-time tokens). ``model`` as in :meth:`get`; the value is deleted
        even when validation fails.
        """
        ns = self._namespace()
        text = await self._backend.take(ns + _check_key(key))
        if text is None:
            return None
        return load_value(text, model)

    # --------------------------------------------------------------------- batches
    @bridged("ctx.state.get_many")
    async def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """``{key: value}`` for the keys present (absent or expired keys are left out)."""
        ns = self._namespace()
        checked = _check_keys(keys)
        found = await self._backend.get_many([ns + k for k in checked])
        cut = len(ns)
        return {k[cut:]: decode_value(v) for k, v in found.items()}

    @bridged("ctx.state.set_many")
    async def set_many(self, items: Mapping[str, Any], ttl: float | None = None) -> None:
        """Store every item, with one ``ttl`` (seconds) for all, atomically.

        Raises:
            ValidationError / SerializationError: one bad key or value rejects the whole
                batch; nothing is written.
        """
        ns = self._namespace()
        ttl = _check_ttl(ttl)
        encoded = {ns + _check_key(k): _dumps(k, v) for k, v in items.items()}
        if encoded:
            await self._backend.set_many(encoded, ttl)

    @bridged("ctx.state.delete_many")
    async def delete_many(self, keys: Sequence[str]) -> int:
        """Remove the keys; the number of live values removed (a repeated key counts once)."""
        ns = self._namespace()
        checked = _check_keys(keys)
        if not checked:
            return 0
        return await self._backend.delete_many([ns + k for k in checked])

    # ------------------------------------------------------------------------ list
    @bridged("ctx.state.list")
    async def list(self, prefix: str = "", cursor: str | None = None, limit: int = 50) -> StatePage:
        """One page of the entries whose key starts with ``prefix``, in ascending key order.

        Args:
            prefix: ``""`` (all keys) or a string in the key grammar.
            cursor: ``next_cursor`` of the previous page, for the same tenant and prefix.
            limit: page size, 1-1000.

        Returns:
            :class:`StatePage`; ``next_cursor`` is ``None`` on the last page. Paging never
            skips nor repeats a key that exists for the whole walk.

        Raises:
            InvalidCursorError: a cursor this server did not issue for this tenant and prefix.
        """
        ns = self._namespace()
        if prefix != "" and (
            type(prefix) is not str or len(prefix) > MAX_KEY_LENGTH or ".." in prefix or not _KEY_RE.fullmatch(prefix)
        ):
            raise _bad_key(prefix, "prefix")
        raw_limit = cast(object, limit)
        if isinstance(raw_limit, bool) or not isinstance(raw_limit, int) or not 1 <= raw_limit <= MAX_LIST_LIMIT:
            raise ValidationError(f"Invalid limit {limit!r}: an integer from 1 to {MAX_LIST_LIMIT}")
        after = None if cursor is None else ns + self._open_cursor(cursor, prefix)
        rows = await self._backend.scan(ns + prefix, after, limit + 1)
        cut = len(ns)
        items = [StateItem(k[cut:], decode_value(v)) for k, v in rows[:limit]]
        next_cursor = self._seal_cursor(prefix, items[-1].key) if len(rows) > limit else None
        return StatePage(items=items, next_cursor=next_cursor)

    def _mac(self, prefix: str, last: str) -> bytes:
        msg = json.dumps(["v1", self._tenant, prefix, last], separators=(",", ":")).encode()
        return hmac.new(self._cursor_key, msg, hashlib.sha256).digest()[:18]

    def _seal_cursor(self, prefix: str, last: str) -> str:
        return f"{_b64e(last.encode('ascii'))}.{_b64e(self._mac(prefix, last))}"

    def _open_cursor(self, cursor: str, prefix: str) -> str:
        if type(cursor) is not str or len(cursor) > 2 * MAX_KEY_LENGTH or cursor.count(".") != 1:
            raise InvalidCursorError()
        body, tag = cursor.split(".")
        try:
            last = _b64d(body).decode("ascii")
            mac = _b64d(tag)
        except (binascii.Error, ValueError) as exc:
            raise InvalidCursorError() from exc
        if not hmac.compare_digest(mac, self._mac(prefix, last)):
            raise InvalidCursorError()
        if not last.startswith(prefix):  # cannot happen for a cursor we sealed
            raise InvalidCursorError()
        return last


_RESERVED_ROOT = "x/"
_RESERVED_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def reserved_space(state: ContextState, namespace: str) -> tuple[StateBackend, str]:
    """The backend and key prefix of a namespace the framework keeps for itself in ``state``'s
    tenant (consent records): ``x/<namespace>/<tenant>/``. Handlers' keys all live under
    ``t/<tenant>/``, so no handler key can name these and ``ctx.state.list`` never shows them.

    Args:
        namespace: ``[a-z][a-z0-9_-]{0,31}`` (e.g. ``"consent"``).

    Raises:
        TenantRequiredError: ``state`` has no tenant (fail closed, as every ``ctx.state`` call).
        ValueError: ``namespace`` outside its grammar.
    """
    if _RESERVED_NAME_RE.fullmatch(namespace) is None:
        raise ValueError(f"reserved namespace {namespace!r} is not [a-z][a-z0-9_-]{{0,31}}")
    tenant = state.tenant_id
    if tenant is None:
        raise TenantRequiredError()
    return state._backend, f"{_RESERVED_ROOT}{namespace}/{quote(tenant, safe='')}/"  # pyright: ignore[reportPrivateUsage]
