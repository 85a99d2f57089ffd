"""Find the ``McpRouter`` endpoints of an app: included routers flattened, mounted apps searched.

Used by the stdio transport (which router to serve), the CLI (``serve`` checks, the printed URL)
and ``fastapi_mcp_ctx.testing`` (which router's state to reset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.routing import Mount

from ._fastapi_routes import flat_routes
from .errors import ConfigurationError
from .router import McpRouter, mounted_router_message

__all__ = ["McpTarget", "find_targets"]


@dataclass(frozen=True, slots=True)
class McpTarget:
    """An ``McpRouter`` found in an app: the router, the app whose routes hold it (the
    ``dependency_overrides`` provider), and its full HTTP path."""

    router: McpRouter
    app: Any
    path: str


def find_targets(app: Any) -> list[McpTarget]:
    """Every ``McpRouter`` route of ``app``: included routers flattened, mounted apps searched.

    Raises:
        ConfigurationError: an ``McpRouter`` is mounted itself (``app.mount("/mcp", mcp_router)``)
            and not included anywhere: it serves nothing, and the message names
            ``app.include_router(mcp_router)``; or ``app`` is an ``McpRouter`` itself (served or
            tested alone it would be called as an ASGI app, which it refuses).
    """
    if isinstance(app, McpRouter):
        raise ConfigurationError(
            "This is an McpRouter, not an app: include it in one (app = FastAPI(); app.include_router(mcp_router)) "
            "and serve or test that app"
        )
    found: list[McpTarget] = []
    mounted: list[tuple[McpRouter, str]] = []

    def walk(current: Any, prefix: str) -> None:
        for path, route in flat_routes(getattr(current, "routes", [])):
            owner = getattr(getattr(getattr(route, "endpoint", None), "__self__", None), "router", None)
            if isinstance(owner, McpRouter) and path is not None:
                target = McpTarget(owner, current, prefix + path)
                if target not in found:
                    found.append(target)
            elif isinstance(route, Mount) and isinstance(route.app, McpRouter):
                mounted.append((route.app, prefix + route.path))  # its __call__ refuses every request
            elif isinstance(route, Mount) and route.app is not None:
                walk(route.app, prefix + route.path)

    walk(app, "")
    included = {id(target.router) for target in found}
    for router, path in mounted:
        if id(router) not in included:
            raise ConfigurationError(mounted_router_message(path))
    return found
