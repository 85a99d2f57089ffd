"""Dual-sink request logging: the server log plus ``notifications/message`` to the client.

One level check gates both sinks: ``MCP_LOG_LEVEL`` is a floor (RFC 5424 order); the
client's own level (2025: ``logging/setLevel``; 2026-07-28: ``_meta`` ``logLevel``, and no
messages at all without it) can only narrow it. Sensitive fields are masked as
``[REDACTED]`` at any depth in both sinks; the caller's data is never modified. Inside the
message and every string value, inline secrets are masked too: ``Bearer <token>`` /
``Basic <credentials>`` (the scheme repeated too: ``Bearer Bearer <token>``),
``<sensitive-name>=<value>`` and ``<sensitive-name>: <value>`` (``password=…``, ``api_key: …``,
``"token": "…"``; after an ``Authorization`` name, any scheme word and its credential:
``Authorization: DPoP <token>``, ``ApiKey …``, ``Negotiate …``), a bare JWT anywhere (``eyJ…`` in two to five base64url segments) and the
password of a ``scheme://user:pw@`` URL (one precompiled regex per pattern, applied to strings
only). A field name is sensitive in the plural too (``tokens``, ``passwords``, ``api_keys``), and when a
sensitive compound appears anywhere in it (``private_key_pem``, ``user_password_hash``).
Spec 2025-11-25 ``server/utilities/logging``; 2026-07-28 ``basic/index`` (logLevel opt-in).

The server log is the ``fastapi_mcp_ctx`` logger (its children too). Each ``ctx.log`` record
carries ``record.mcp = {"level": <RFC 5424 name>, "request_id", "tenant_id", "session_id",
"trace_id", "logger", "data": {...}}`` for the application's own formatters. Where the
application configured no handler for it (none on ``fastapi_mcp_ctx`` nor on any ancestor it
propagates to, root included: plain ``uvicorn app:app`` is such a case), the library adds one
at first use, writing ``LEVEL: fastapi_mcp_ctx - message request_id=… tenant_id=…
session_id=… trace_id=… key=<json>…`` to stderr at ``MCP_LOG_LEVEL``; it falls silent as soon
as any other handler appears on that path. ``logging.config.dictConfig`` naming
``fastapi_mcp_ctx`` replaces it; a ``logging.NullHandler()`` on it prevents it.
"""

from __future__ import annotations

import logging
import math
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from pydantic_core import to_json

from .._bridge import LoopOwner, bridged
from .._wire.envelope import LOG_LEVELS
from .._wire.jsonrpc import notification_message

__all__ = ["ContextLogger", "install_default_handler", "level_allows", "redact", "redact_text"]

_PY_LEVELS: Final[dict[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}
_SENSITIVE_WORDS: Final[frozenset[str]] = frozenset(
    {"password", "passwd", "secret", "token", "apikey", "authorization", "cookie", "credential", "credentials", "privatekey", "jwt", "bearer"}
    | {"pwd", "passphrase", "auth", "secrets", "cookies", "passcode", "otp"}
)
_SENSITIVE_COMPOUNDS: Final = (  # masked anywhere in a key's joined words, not only as a whole word
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "credential",
    "apikey",
    "privatekey",
    "accesstoken",
    "refreshtoken",
    "accesskey",
    "secretkey",
    "signingkey",
    "encryptionkey",
    "sessionkey",
    "sessioncookie",
    "clientsecret",
    "setcookie",
)
_NAME: Final = (
    r"[A-Za-z0-9_.\-]*(?:password|passwd|pwd|passphrase|passcode|secret|token|api[_-]?key|(?P<authz>authorization)|auth"
    r"|cookie|credentials?|private[_-]?key|access[_-]?key|jwt)"
)
# RFC 9110 §11.4 ``credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]``: after an
# authorization name the scheme word (Bearer, DPoP, ApiKey, Negotiate, any) and its credential go.
_AUTH_SCHEME: Final = r"(?!\[REDACTED\])[A-Za-z][A-Za-z0-9!#$%&*+.^_|~\-]*+[ \t]+"
_INLINE_PAIR: Final = re.compile(
    rf"(?i)(?<![A-Za-z0-9_.\-])(?P<name>{_NAME})(?P<sep>[\"']?\s*[=:]\s*[\"']?)"
    r"(?P<value>(?(authz)(?:(?:(?:bearer|basic|token)\s+)+|" + _AUTH_SCHEME + r")?|(?:(?:bearer|basic|token)\s+)*)(?!\[REDACTED\])(?:(?<=\")[^\"]*|(?<=')[^']*|[^\s,;&\"'<>(){}\[\]]+))"
)
_INLINE_SCHEME: Final = re.compile(
    r"(?i)\b(?P<scheme>bearer|basic)(?:\s+(?:bearer|basic)\b)*\s+(?!\[REDACTED\])[A-Za-z0-9\-._~+/]+=*"
)
_BARE_JWT: Final = re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]++(?:\.[A-Za-z0-9_\-]*+){2,4}+")
_URL_PASSWORD: Final = re.compile(r"(?P<head>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)[^@/\s]+@")
_WORD_SPLIT: Final = re.compile(r"[_\-\s.]+|(?<=[a-z0-9])(?=[A-Z])")
REDACTED: Final = "[REDACTED]"

server_logger = logging.getLogger("fastapi_mcp_ctx")
_CONTEXT_FIELDS: Final = ("request_id", "tenant_id", "session_id", "trace_id")


def _has_other_handler(logger: logging.Logger, own: logging.Handler | None = None) -> bool:
    """True when a record of ``logger`` reaches a handler other than ``own`` (not counting
    ``logging.lastResort``, which prints only the message of warnings and worse)."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(handler is not own for handler in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


class _Formatter(logging.Formatter):
    """``LEVEL:    logger - message request_id=… tenant_id=… session_id=… trace_id=… key=<json>``."""

    def format(self, record: logging.LogRecord) -> str:
        fields: Any = getattr(record, "mcp", None)
        level = record.levelname
        text = record.getMessage()
        if isinstance(fields, dict):
            mcp: dict[str, Any] = fields  # pyright: ignore[reportUnknownVariableType]
            level = str(mcp.get("level", level)).upper()
            parts = [f"{name}={mcp.get(name) if mcp.get(name) is not None else '-'}" for name in _CONTEXT_FIELDS]
            data: Any = mcp.get("data") or {}
            parts.extend(f"{key}={to_json(value, fallback=str).decode()}" for key, value in dict(data).items())
            text = f"{text} {' '.join(parts)}"
        line = f"{level + ':':<9} {record.name} - {text}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        if record.stack_info:
            line = f"{line}\n{self.formatStack(record.stack_info)}"
        return line


class _DefaultHandler(logging.StreamHandler):  # pyright: ignore[reportMissingTypeArgument]
    """stderr, used only while no other handler receives the library's records."""

    def emit(self, record: logging.LogRecord) -> None:
        if _has_other_handler(server_logger, self):
            return  # the application configured logging after all: its handlers get the record
        super().emit(record)


def install_default_handler(level: str) -> bool:
    """Give the ``fastapi_mcp_ctx`` logger a stderr handler when the application configured none
    (module docstring); its level becomes ``level`` (an RFC 5424 name) when it had none.

    Returns:
        True when the handler was added (at most once per process).
    """
    if _has_other_handler(server_logger):
        return False
    handler = _DefaultHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    server_logger.addHandler(handler)
    if server_logger.level == logging.NOTSET:
        server_logger.setLevel(_PY_LEVELS[level])
    return True


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _is_sensitive(key: str) -> bool:
    words = [w.lower() for w in _WORD_SPLIT.split(key) if w]
    joined = "".join(words)
    if joined in _SENSITIVE_WORDS or _singular(joined) in _SENSITIVE_WORDS:
        return True
    if any(w in _SENSITIVE_WORDS or _singular(w) in _SENSITIVE_WORDS for w in words):
        return True
    return any(s in joined for s in _SENSITIVE_COMPOUNDS)  # private_key_pem, apikey_value, user_password_hash


def redact_text(text: str) -> str:
    """``text`` with inline secrets masked (module docstring); unchanged when it has none."""
    text = _INLINE_PAIR.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _INLINE_SCHEME.sub(lambda m: f"{m['scheme']} {REDACTED}", text)
    if "eyJ" in text:
        text = _BARE_JWT.sub(REDACTED, text)
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}@", text)


def redact(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` with sensitive mapping keys masked, at any depth (≤ 32 levels), and
    each ``inf``/``nan`` float written as the string ``"Infinity"``, ``"-Infinity"`` or
    ``"NaN"`` (not JSON numbers, RFC 8259 §6; log data keeps the value readable), and inline
    secrets masked in every string (:func:`redact_text`)."""
    if _depth > 32:
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        items: Mapping[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]
        return {str(k): (REDACTED if _is_sensitive(str(k)) else redact(v, _depth + 1)) for k, v in items.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, _depth + 1) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def level_allows(level: str, minimum: str | None) -> bool:
    """True when ``level`` is at or above ``minimum`` in RFC 5424 order (None = everything)."""
    if minimum is None:
        return True
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(minimum)


class ContextLogger:
    """``ctx.log``: ``debug`` … ``emergency`` (each ``(message: str, **data)``).

    Server log: a record of ``fastapi_mcp_ctx`` whose ``record.mcp`` holds the level, the
    ``correlation`` fields (``request_id``, ``tenant_id``, ``session_id``, ``trace_id``), the
    ``logger`` name and ``data``. Wire: ``notifications/message`` with ``{"level", "logger",
    "data": {"message": message, **data}}`` (redacted); ``logger`` is ``logger_name`` (the tool's
    name). Delivery is fire-and-forget: a failed send never fails the handler. An ``inf`` or
    ``nan`` in ``data`` is sent (and logged) as the string ``"Infinity"``, ``"-Infinity"`` or
    ``"NaN"``: the message stays valid JSON and the value stays visible.
    """

    def __init__(
        self,
        *,
        floor: str,
        client_level: Callable[[], str | None],
        client_opted_in: bool,
        send: Callable[[dict[str, Any]], Awaitable[None]] | None,
        correlation: Mapping[str, Any],
        logger_name: str | None = None,
        call: LoopOwner | None = None,
    ) -> None:
        self._call = call  # a sync tool's ctx.log.info runs on this call's loop (_bridge)
        self._floor = floor
        self._client_level = client_level
        self._client_opted_in = client_opted_in
        self._send = send
        self._correlation = correlation
        self._logger_name = logger_name

    @bridged("ctx.log.log")
    async def log(self, level: str, message: str, **data: Any) -> None:
        """Log at ``level`` (one of the eight RFC 5424 names); raises ValueError otherwise."""
        await self._log(level, message, data)

    async def _log(self, level: str, message: str, data: dict[str, Any]) -> None:
        if level not in _PY_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        if not level_allows(level, self._floor):
            return
        safe = redact(data)
        message = redact_text(message)
        fields = {"level": level, **self._correlation, "logger": self._logger_name, "data": safe}
        server_logger.log(_PY_LEVELS[level], "%s", message, extra={"mcp": fields})
        if self._send is None or not self._client_opted_in:
            return
        if not level_allows(level, self._client_level()):
            return
        params: dict[str, Any] = {"level": level, "data": {**safe, "message": message}}
        if self._logger_name:
            params["logger"] = self._logger_name
        try:
            await self._send(notification_message("notifications/message", params))
        except Exception:  # noqa: BLE001 - fire-and-forget by contract
            server_logger.debug("notifications/message dropped", exc_info=True)

    @bridged("ctx.log.debug")
    async def debug(self, message: str, **data: Any) -> None:
        """Log at ``debug``."""
        await self._log("debug", message, data)

    @bridged("ctx.log.info")
    async def info(self, message: str, **data: Any) -> None:
        """Log at ``info``."""
        await self._log("info", message, data)

    @bridged("ctx.log.notice")
    async def notice(self, message: str, **data: Any) -> None:
        """Log at ``notice``."""
        await self._log("notice", message, data)

    @bridged("ctx.log.warning")
    async def warning(self, message: str, **data: Any) -> None:
        """Log at ``warning``."""
        await self._log("warning", message, data)

    @bridged("ctx.log.error")
    async def error(self, message: str, error: BaseException | None = None, **data: Any) -> None:
        """Log at ``error``; ``error`` adds ``{"error": str(error)}``."""
        if error is not None:
            data["error"] = str(error)
        await self._log("error", message, data)

    @bridged("ctx.log.critical")
    async def critical(self, message: str, **data: Any) -> None:
        """Log at ``critical``."""
        await self._log("critical", message, data)

    @bridged("ctx.log.alert")
    async def alert(self, message: str, **data: Any) -> None:
        """Log at ``alert``."""
        await self._log("alert", message, data)

    @bridged("ctx.log.emergency")
    async def emergency(self, message: str, **data: Any) -> None:
        """Log at ``emergency``."""
        await self._log("emergency", message, data)
