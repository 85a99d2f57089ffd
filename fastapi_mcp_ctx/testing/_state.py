"""Emptying ``ctx.state`` between tests: :func:`reset_state` (exported by
:mod:`fastapi_mcp_ctx.testing`) and the test client's :meth:`StateReset.reset_state`, which finds
the ``McpRouter`` to empty: the one that served the client, or the app's only one.
"""

from __future__ import annotations

from starlette.types import ASGIApp

from .._discovery import find_targets
from ..backends import MemoryBackend
from ..router import McpRouter
from ..state import clear_state

__all__ = ["StateReset", "reset_state"]


class StateReset:
    """``reset_state`` of :class:`~fastapi_mcp_ctx.testing.McpTestClient` (a mixin: no slots of its own)."""

    __slots__ = ()
    app: ASGIApp
    router: McpRouter | None

    async def reset_state(self, tenant_id: str | None = None, *, allow_persistent: bool = False) -> int:
        """:func:`reset_state` on :attr:`router`: the ``McpRouter`` that served this client, or,
        before any request, the app's only ``McpRouter``.

        Raises:
            RuntimeError: no request reached an ``McpRouter`` yet and the app holds none, or
                several (then call ``reset_state(mcp_router)``).
        """
        router = self.router
        if router is None:
            targets = find_targets(self.app)
            if len(targets) != 1:
                found = ", ".join(sorted(t.path for t in targets)) or "none"
                raise RuntimeError(f"Cannot tell which McpRouter's state to reset (found: {found}): call reset_state(mcp_router)")
            router = targets[0].router
        return await reset_state(router, tenant_id=tenant_id, allow_persistent=allow_persistent)


async def reset_state(router: McpRouter, *, tenant_id: str | None = None, allow_persistent: bool = False) -> int:
    """Delete ``router``'s ``ctx.state`` keys, of every tenant or of ``tenant_id``; for tests.

    Always works on the in-memory backend (``memory://``, the default). A persistent backend
    (Redis, SQL, your own) is refused unless ``allow_persistent=True``, so that a
    ``MCP_STORAGE_URL`` leaking into a test run cannot wipe a real store. With it, every
    ``ctx.state`` key the backend holds goes: on Redis those of the backend's namespace; on
    SQL those of the ``mcp_state`` table, which every router on that database shares.

    Returns:
        The number of live keys deleted.

    Raises:
        RuntimeError: a persistent backend without ``allow_persistent=True``.
        StateUnavailableError: the backend cannot be reached.
    """
    backend = router.state_backend
    if not isinstance(backend, MemoryBackend) and not allow_persistent:
        raise RuntimeError(
            f"reset_state empties test backends only, and this router's ctx.state is on {type(backend).__name__}: "
            "build the router with McpRouter(settings=McpSettings(storage_url='memory://')) in tests (or set MCP_STORAGE_URL=memory://), or pass allow_persistent=True if that store "
            "holds test data only (it deletes every ctx.state key there)"
        )
    return await clear_state(backend, tenant_id)
