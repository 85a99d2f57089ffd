"""Dual-sink request logging: the server log plus ``notifications/message`` to the client.

One level check gates both sinks: ``MCP_LOG_LEVEL`` is a floor (RFC 5424 order); the
client's own level (2025: ``logging/setLevel``; 2026-07-28: ``_meta`` ``logLevel``, and no
messages at all without it) can only narrow it. Sensitive fields are masked as
``[REDACTED]`` at any depth in both sinks; the caller's data is never modified.
Spec 2025-11-25 ``server/utilities/logging``; 2026-07-28 ``basic/index`` (logLevel opt-in).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ._envelope import LOG_LEVELS
from ._jsonrpc import notification_message

__all__ = ["ContextLogger", "level_allows", "redact"]

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
)
_WORD_SPLIT: Final = re.compile(r"[_\-\s.]+|(?<=[a-z0-9])(?=[A-Z])")
REDACTED: Final = "[REDACTED]"

server_logger = logging.getLogger("fastapi_mcp_ctx")


def _is_sensitive(key: str) -> bool:
    words = [w.lower() for w in _WORD_SPLIT.split(key) if w]
    joined = "".join(words)
    if joined in _SENSITIVE_WORDS:
        return True
    if any(w in _SENSITIVE_WORDS for w in words):
        return True
    return any(joined.endswith(s) for s in ("apikey", "privatekey", "accesstoken", "refreshtoken"))


def redact(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` with sensitive mapping keys masked, at any depth (≤ 32 levels)."""
    if _depth > 32:
        return REDACTED
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

    Every line carries ``requestId``, ``tenantId``, ``traceId`` in the server log; the wire
    payload is ``{"message": message, **data}`` (redacted). Delivery is fire-and-forget: a
    failed send never fails the handler.
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
    ) -> None:
        self._floor = floor
        self._client_level = client_level
        self._client_opted_in = client_opted_in
        self._send = send
        self._correlation = correlation
        self._logger_name = logger_name

    async def log(self, level: str, message: str, **data: Any) -> None:
        """Log at ``level`` (one of the eight RFC 5424 names); raises ValueError otherwise."""
        if level not in _PY_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        if not level_allows(level, self._floor):
            return
        safe = redact(data)
        server_logger.log(_PY_LEVELS[level], "%s", message, extra={"mcp": {**safe, **self._correlation}})
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

    async def debug(self, message: str, **data: Any) -> None:
        """Log at ``debug``."""
        await self.log("debug", message, **data)

    async def info(self, message: str, **data: Any) -> None:
        """Log at ``info``."""
        await self.log("info", message, **data)

    async def notice(self, message: str, **data: Any) -> None:
        """Log at ``notice``."""
        await self.log("notice", message, **data)

    async def warning(self, message: str, **data: Any) -> None:
        """Log at ``warning``."""
        await self.log("warning", message, **data)

    async def error(self, message: str, error: BaseException | None = None, **data: Any) -> None:
        """Log at ``error``; ``error`` adds ``{"error": str(error)}``."""
        if error is not None:
            data["error"] = str(error)
        await self.log("error", message, **data)

    async def critical(self, message: str, **data: Any) -> None:
        """Log at ``critical``."""
        await self.log("critical", message, **data)

    async def alert(self, message: str, **data: Any) -> None:
        """Log at ``alert``."""
        await self.log("alert", message, **data)

    async def emergency(self, message: str, **data: Any) -> None:
        """Log at ``emergency``."""
        await self.log("emergency", message, **data)
