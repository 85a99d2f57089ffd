"""The answers :class:`~fastapi_mcp_ctx.testing.McpTestClient` returns: :class:`McpResponse`
(any request) and :class:`ToolResult` (``tools/call``), re-exported by
``fastapi_mcp_ctx.testing``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from .._handlers.results import ERROR_META_KEY

__all__ = ["Asked", "McpResponse", "Notified", "ToolResult"]


@dataclass(frozen=True, slots=True)
class Asked:
    """One question the server asked during a request, and what the test client answered.

    Attributes:
        method: ``"elicitation/create"``, ``"sampling/createMessage"`` or ``"roots/list"``.
        params: the request's params as received.
        answer: the result sent back (``ElicitResult``, ``CreateMessageResult``, ``{"roots"}``).
        key: the ``inputRequests`` key (2026-07-28); None for a 2025 request.
        round: 2026-07-28: the ``input_required`` round that asked (1, 2...); 2025: the
            position of the request among those of the call (1, 2...).
    """

    method: str
    params: dict[str, Any]
    answer: dict[str, Any]
    key: str | None = None
    round: int = 1


class Notified:
    """``logs`` and ``progress``, read from ``notifications`` (whole JSON-RPC messages)."""

    __slots__ = ()
    notifications: list[dict[str, Any]]

    @property
    def logs(self) -> list[dict[str, Any]]:
        """``params`` of each ``notifications/message``: ``{"level", "logger"?, "data"}``."""
        return [dict(m.get("params") or {}) for m in self.notifications if m.get("method") == "notifications/message"]

    @property
    def progress(self) -> list[dict[str, Any]]:
        """``params`` of each ``notifications/progress``: ``{"progressToken", "progress", "total"?, "message"?}``."""
        return [dict(m.get("params") or {}) for m in self.notifications if m.get("method") == "notifications/progress"]


@dataclass(frozen=True, slots=True)
class McpResponse(Notified):
    """The answer to one request: ``result`` (as received), the ``notifications`` sent before it
    on the request's stream (in order; see ``logs``, ``progress``), the HTTP status and headers
    (lower-case names), the ``method`` sent, and ``asked``: each question the server asked
    (2026-07-28 ``inputRequests`` entries, 2025 server→client requests; ``ping`` left out) with
    the answer sent, in order. After answered rounds, ``result``, ``http_status`` and
    ``headers`` are those of the last retry; ``notifications`` those of every round."""

    method: str
    result: dict[str, Any]
    notifications: list[dict[str, Any]]
    http_status: int
    headers: dict[str, str]
    asked: tuple[Asked, ...] = ()

    @property
    def input_required(self) -> bool:
        """The result is a 2026-07-28 ``input_required`` one (seen with ``auto_answer=False``)."""
        return self.result.get("resultType") == "input_required"

    @property
    def rounds(self) -> int:
        """How many rounds asked something: 2026-07-28 ``input_required`` results answered;
        2025 server→client requests answered (each is a live round trip)."""
        return len({a.round for a in self.asked})


@dataclass(frozen=True, slots=True)
class ToolResult(McpResponse):
    """The answer to ``tools/call``: a :class:`McpResponse` whose ``CallToolResult`` is read."""

    @property
    def is_error(self) -> bool:
        """``isError``: the tool failed (invalid arguments, ``ToolError``, a crash)."""
        return self.result.get("isError") is True

    @property
    def structured(self) -> Any:
        """``structuredContent`` (``{"result": value}`` for scalar returns), or None."""
        return self.result.get("structuredContent")

    @property
    def content(self) -> list[dict[str, Any]]:
        """The content blocks (``{"type": "text", "text": ...}``, images...)."""
        return list(self.result.get("content") or [])

    @property
    def error(self) -> dict[str, Any] | None:
        """The error envelope of an ``isError`` result, ``{"code", "message", "data": {"reason",
        "recovery"?, ...}}`` (``_meta["fastapi-mcp-ctx/error"]``), or None."""
        meta = cast(dict[str, Any], self.result.get("_meta") or {})
        envelope = meta.get(ERROR_META_KEY)
        return cast(dict[str, Any], envelope) if self.is_error and isinstance(envelope, dict) else None

    @property
    def text(self) -> str:
        """Every text block's ``text``, joined by newlines (``""`` when there is none)."""
        return "\n".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")
