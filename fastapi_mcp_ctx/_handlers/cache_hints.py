"""2026-07-28 cache hints (spec ``server/utilities/caching``): what a resource, a prompt or a list
declares of its results' ``ttlMs`` and ``cacheScope``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["CacheHints", "CacheScope"]

CacheScope = Literal["public", "private"]


@dataclass(frozen=True, slots=True)
class CacheHints:
    """2026-07-28 cache hints of one result (spec ``server/utilities/caching``): ``ttl_ms``
    (milliseconds, >= 0) and ``cache_scope`` (``"public"``: no user data; ``"private"``); None
    leaves the server's default (``MCP_CACHE_TTL_MS`` / ``MCP_CACHE_SCOPE``)."""

    ttl_ms: int | None = None
    cache_scope: CacheScope | None = None

    def __post_init__(self) -> None:
        if self.ttl_ms is not None and (isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms < 0):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("ttl_ms must be an integer >= 0 (milliseconds)")
        if self.cache_scope not in (None, "public", "private"):
            raise ValueError("cache_scope must be 'public' or 'private'")

    def apply(self, result: dict[str, Any]) -> dict[str, Any]:
        """Set the declared hints on ``result`` (the server defaults fill the rest later)."""
        if self.ttl_ms is not None:
            result["ttlMs"] = self.ttl_ms
        if self.cache_scope is not None:
            result["cacheScope"] = self.cache_scope
        return result
