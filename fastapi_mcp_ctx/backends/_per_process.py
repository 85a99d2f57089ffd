"""``ctx.state`` in memory under ``fastapi-mcp-ctx serve --workers N``: refused where it is used.

An app served by N worker processes with the default ``MCP_STORAGE_URL=memory://`` has N
separate ``ctx.state`` stores: a value written through one worker is missing on the others.
Whether the app uses ``ctx.state`` at all is known only when a handler reaches for it, so:

- ``MCP_STORAGE_URL=memory://`` chosen explicitly (the environment, or ``McpSettings(storage_url=...)``)
  beside ``--workers N`` is a contradiction the CLI refuses at start-up (:func:`explicit_memory_state`);
- left at its default, the workers start (an app that never uses ``ctx.state`` loses nothing),
  and the first ``ctx.state`` of a request in a worker raises
  :class:`~fastapi_mcp_ctx.errors.ConfigurationError` naming what to set, before anything is
  stored where the other workers cannot see it (:func:`guard_state_factory`).

The CLI tells its workers their number through the environment variable :data:`SERVE_WORKERS_ENV`
(uvicorn's worker processes inherit it and import the app afresh).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final, TypeVar

from ..errors import ConfigurationError
from ..settings import McpSettings
from .memory import MemoryBackend

__all__ = ["SERVE_WORKERS_ENV", "explicit_memory_state", "guard_state_factory", "per_process_state_message", "served_workers"]

SERVE_WORKERS_ENV: Final = "FASTAPI_MCP_CTX_SERVE_WORKERS"
"""Set by ``fastapi-mcp-ctx serve --workers N`` (N > 1) for its worker processes."""

_T = TypeVar("_T")


def served_workers() -> int:
    """The worker processes ``serve`` started this process among (1 when not under ``--workers``)."""
    raw = os.environ.get(SERVE_WORKERS_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else 1


def per_process_state_message(workers: int) -> str:
    """What to do about ``ctx.state`` in memory under ``--workers workers``."""
    return (
        f"ctx.state is in this process's memory (MCP_STORAGE_URL=memory://) but `fastapi-mcp-ctx serve --workers {workers}` "
        f"runs {workers} processes, each with its own, so a value written through one worker is missing on the others: "
        "set MCP_STORAGE_URL=redis://…, postgresql+asyncpg://… or sqlite+aiosqlite:///… (after `fastapi-mcp-ctx migrate`), "
        "or serve with --workers 1"
    )


def explicit_memory_state(settings: McpSettings, backend: object) -> bool:
    """Whether ``memory://`` ``ctx.state`` was chosen explicitly (set, not defaulted)."""
    return isinstance(backend, MemoryBackend) and "storage_url" in settings.model_fields_set


def guard_state_factory(factory: Callable[[str | None], _T], backend: object) -> Callable[[str | None], _T]:
    """``factory`` (the router's ``ctx.state`` factory), or, in a worker of ``serve --workers N``
    whose ``ctx.state`` is in memory, a factory that refuses.

    Raises (from the returned factory, at a request's first ``ctx.state``):
        ConfigurationError: ``-32603``; the message names ``MCP_STORAGE_URL`` and ``--workers 1``.
    """
    workers = served_workers()
    if workers <= 1 or not isinstance(backend, MemoryBackend):
        return factory

    def refused(tenant_id: str | None) -> _T:
        raise ConfigurationError(per_process_state_message(workers))

    return refused
