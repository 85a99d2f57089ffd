"""The task store a router uses, chosen like the session store by ``MCP_SESSION_STORE_URL``:
``memory://`` keeps tasks in this process (:class:`~.memory_store.MemoryTaskStore`), ``redis://``
in the same Redis as the sessions (:class:`~.redis_store.RedisTaskStore`, on the session store's
:class:`~fastapi_mcp_ctx._replicas.link.RedisLink`), so every replica answers for every task."""

from __future__ import annotations

from typing import Any

from ..settings import McpSettings
from .memory_store import MemoryTaskStore
from .records import TaskStore

__all__ = ["task_store"]


def task_store(settings: McpSettings, link: Any) -> TaskStore:
    """The store for ``settings`` (``link``: the replica stores' Redis link, None in memory)."""
    if link is None:
        return MemoryTaskStore()
    from .redis_store import RedisTaskStore  # noqa: PLC0415 - the redis extra is needed only here

    return RedisTaskStore(link)
