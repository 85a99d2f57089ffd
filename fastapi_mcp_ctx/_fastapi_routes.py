"""The MCP endpoint's route and the app's routes as FastAPI serves them: every touch of
FastAPI's routing internals lives here, as :mod:`._fastapi_compat` holds its dependency
solver's (DESIGN.md decision 3).

:class:`LeanRoute` serves the endpoint without a path operation's solve when the route has
no dependencies (decision 12); :func:`flat_routes` and :func:`flat_route_entries` read an
app's routes with included routers flattened, on FastAPI before and after 0.160's lazy
``include_router``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import routing as fastapi_routing
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

__all__ = ["LEAN_SCOPE_KEY", "LeanRoute", "RouteEntry", "flat_route_entries", "flat_routes"]

LEAN_SCOPE_KEY = "fastapi_mcp_ctx.lean"
"""Request-scope flag: the request reached the MCP endpoint through :class:`LeanRoute` without
FastAPI's request handling (no route-level solve stored exit stacks in its scope)."""


class LeanRoute(APIRoute):
    """The MCP endpoint's route: FastAPI's request handling only when the route has
    dependencies (``app.include_router(router, dependencies=[...])``, ``FastAPI(dependencies=...)``);
    otherwise the endpoint, ``async (request) -> Response``, is called directly, saving the
    dependency solve of a path operation that has nothing to solve. Preserved by
    ``include_router``, which re-creates routes with ``type(route)``.

    An endpoint bound to an object with a ``screen(scope) -> Response | None`` method (the MCP
    endpoint) has it called first, on the raw ASGI scope, before FastAPI's request handling solves
    any route, router or app dependency: a Response it returns is sent as the answer (the header
    bound, a repeated credential header), None lets the request through.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self._screen: Callable[[Scope], Response | None] | None = getattr(getattr(endpoint, "__self__", None), "screen", None)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        screen = self._screen
        if screen is not None and scope["type"] == "http":
            refused = screen(scope)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await super().handle(scope, receive, send)

    async def serve_directly(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request the app's router matched to this route when FastAPI's request
        handling has nothing to do (no dependency, no body bound: ``_server.claim``): the screen,
        then the endpoint on a ``Request`` of ``scope``, its response sent. An exception the
        endpoint raises reaches the app's exception handlers (``ExceptionMiddleware``) as from
        FastAPI's handling."""
        screen = self._screen
        if screen is not None:
            refused = screen(scope)
            if refused is not None:
                await refused(scope, receive, send)
                return
        scope[LEAN_SCOPE_KEY] = True  # nothing read the body before the endpoint
        response = await self.endpoint(Request(scope, receive, send))
        await response(scope, receive, send)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        if self._has_http_dependencies():
            return super().get_route_handler()
        endpoint: Callable[[Request], Coroutine[Any, Any, Response]] = self.endpoint

        async def lean(request: Request) -> Response:
            request.scope[LEAN_SCOPE_KEY] = True  # nothing read the body before the endpoint
            return await endpoint(request)

        return lean

    def _has_http_dependencies(self) -> bool:
        if self.dependencies:
            return True
        # FastAPI >= 0.160 includes routers lazily: the including router's dependencies live
        # in an "effective route context" set while it builds this route's handler.
        context_var: Any = getattr(fastapi_routing, "_effective_route_context_var", None)
        if context_var is None:
            return False
        context: Any = context_var.get(None)
        if context is None:
            return False
        dependencies: Any = getattr(context, "dependencies", None)
        return dependencies is None or bool(dependencies)  # an unknown shape takes the safe path


def flat_routes(routes: Sequence[BaseRoute]) -> Iterator[tuple[str | None, BaseRoute]]:
    """``(full path, route)`` of every route, included routers flattened.

    FastAPI >= 0.160 includes routers lazily (``app.routes`` holds one entry per
    ``include_router``, expanded by ``fastapi.routing.iter_route_contexts``); older versions
    copy every route into ``app.routes`` with its prefixed path.
    """
    iterate: Any = getattr(fastapi_routing, "iter_route_contexts", None)
    if iterate is None:
        for route in routes:
            yield getattr(route, "path", None), route
        return
    for context in iterate(routes):
        yield context.path, context.original_route


@dataclass(frozen=True, slots=True)
class RouteEntry:
    """One route of an app as FastAPI serves it, included routers flattened.

    Attributes:
        path: the full path (prefixes joined), None for a route without one (``Host``).
        route: the route object registered (a ``LeanRoute``, a ``Mount``...).
        dependencies: the dependencies FastAPI runs for it: app-, include- and route-level.
        max_body_size: FastAPI >= 0.160's body bound of the route or its inclusion (None: none).
    """

    path: str | None
    route: BaseRoute
    dependencies: Sequence[Any]
    max_body_size: int | None


def flat_route_entries(routes: Sequence[BaseRoute]) -> Iterator[RouteEntry]:
    """:func:`flat_routes` with each route's effective dependencies and body bound (what the
    including routers add on FastAPI >= 0.160; copied into the route itself before)."""
    iterate: Any = getattr(fastapi_routing, "iter_route_contexts", None)
    if iterate is None:
        for route in routes:
            yield RouteEntry(getattr(route, "path", None), route, getattr(route, "dependencies", None) or (), None)
        return
    for context in iterate(routes):  # a RouteContext reads its attributes from the effective route
        dependencies: Any = getattr(context, "dependencies", None) or ()
        max_body_size: Any = getattr(context, "max_body_size", None)
        yield RouteEntry(context.path, context.original_route, dependencies, max_body_size)
