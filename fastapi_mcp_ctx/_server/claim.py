"""The app's router hands the MCP path to the endpoint directly (DESIGN.md decision 12).

FastAPI serves a request through its router: every route's ``matches`` in turn (on FastAPI >= 0.160
an included router is one entry, matched lazily, and matched twice: ``matches`` then ``handle``),
then the route's own request handling (a ``Request``, two exit stacks, an exception wrapper). For the
MCP endpoint with no dependency to run, that is work for nothing. :func:`claim_lean_paths` wraps the
app's router's ``middleware_stack`` (inside the app's middleware, exception handlers and exit stack,
which keep seeing every request) with a :class:`RouterClaim`: a dict lookup of the request's route
path, then :meth:`~fastapi_mcp_ctx._fastapi_compat.LeanRoute.serve_directly`.

A path is claimed only where FastAPI would have picked that route and done nothing but call it
(anything else goes through the router as before, FastAPI's handling unchanged):

* the route is a ``LeanRoute`` whose effective dependencies (app-, include- and route-level) are
  none and which has no FastAPI body bound (``max_body_size``);
* no route before it could match its path (a path parameter, a ``Mount`` prefix, a ``Host``);
* the router has no middleware of its own (``APIRouter(middleware=...)``, a router body bound);
* per request: an HTTP request whose method the route serves, FastAPI's own telemetry off for it.

The claims are computed again when the router's route list changes (a route added, removed, moved
or replaced after start-up): the router's ``routes`` becomes a :class:`VersionedRoutes`, a ``list``
whose every mutation bumps a counter, so the per-request check is one comparison; a list assigned
in its place is noticed by identity. A route added later to a router that was already included
(FastAPI >= 0.160 keeps such routers as one entry) is not noticed: include a router once it is
complete, as FastAPI's own docs do.
Installed by ``McpEndpoint.start`` (at the app's start-up or first request), once per router.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

from starlette.routing import BaseRoute, Host, Mount, WebSocketRoute, compile_path
from starlette.types import Receive, Scope, Send

from .._fastapi_routes import LeanRoute, flat_route_entries

__all__ = ["RouterClaim", "VersionedRoutes", "claim_lean_paths", "lean_claims"]

ASGIApp = Callable[[Scope, Receive, Send], Coroutine[Any, Any, None]]
Claims = dict[str, tuple[LeanRoute, frozenset[str]]]
_TELEMETRY_SCOPE_KEY: Final = "fastapi.telemetry"  # FastAPI >= 0.160 native telemetry: it records the matched route


def lean_claims(routes: Sequence[BaseRoute]) -> Claims:
    """``{route path: (LeanRoute, methods)}`` of the dependency-free MCP routes among ``routes``
    (included routers flattened) that no earlier route could take."""
    claims: Claims = {}
    earlier: list[Any] = []  # compiled path patterns of the routes before
    for entry in flat_route_entries(routes):
        route, path = entry.route, entry.path
        if isinstance(route, WebSocketRoute):
            continue  # never matches an HTTP request
        if path is None or isinstance(route, Host):
            break  # a route matched by something else than its path: nothing after it is claimed
        if (
            isinstance(route, LeanRoute)
            and not entry.dependencies
            and entry.max_body_size is None
            and path not in claims
            and not any(pattern.match(path) for pattern in earlier)
        ):
            claims[path] = (route, frozenset(route.methods or ()))
        earlier.append(compile_path(path.rstrip("/") + "/{path:path}" if isinstance(route, Mount) else path)[0])
    return claims


class VersionedRoutes(list[BaseRoute]):
    """A router's route list that counts its mutations (``version``), so a claim notices a route
    added, removed, moved or replaced in place without comparing the list per request."""

    version: int = 0

    def _bump(self) -> None:
        self.version += 1

    def append(self, route: BaseRoute, /) -> None:
        super().append(route)
        self._bump()

    def extend(self, routes: Any, /) -> None:
        super().extend(routes)
        self._bump()

    def insert(self, index: Any, route: BaseRoute, /) -> None:
        super().insert(index, route)
        self._bump()

    def remove(self, route: BaseRoute, /) -> None:
        super().remove(route)
        self._bump()

    def pop(self, index: Any = -1, /) -> BaseRoute:
        route = super().pop(index)
        self._bump()
        return route

    def clear(self) -> None:
        super().clear()
        self._bump()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        super().sort(*args, **kwargs)
        self._bump()

    def reverse(self) -> None:
        super().reverse()
        self._bump()

    def __setitem__(self, index: Any, value: Any, /) -> None:
        super().__setitem__(index, value)
        self._bump()

    def __delitem__(self, index: Any, /) -> None:
        super().__delitem__(index)
        self._bump()

    def __iadd__(self, routes: Any, /) -> VersionedRoutes:  # pyright: ignore[reportIncompatibleMethodOverride]
        super().__iadd__(routes)
        self._bump()
        return self

    def __imul__(self, n: Any, /) -> VersionedRoutes:  # pyright: ignore[reportIncompatibleMethodOverride]
        super().__imul__(n)
        self._bump()
        return self


class RouterClaim:
    """The router's ``middleware_stack``: claimed paths to their route, the rest to ``next_app``
    (the router's own ``app``)."""

    __slots__ = ("_claims", "_next", "_router", "_routes", "_version")

    def __init__(self, router: Any, next_app: ASGIApp) -> None:
        self._router = router
        self._next = next_app
        self._routes = VersionedRoutes()
        self._version = -1
        self._claims: Claims = {}
        self.refresh()

    def refresh(self) -> None:
        """Compute the claims again from the router's routes (made a :class:`VersionedRoutes`)."""
        routes = self._router.routes
        if not isinstance(routes, VersionedRoutes):
            routes = VersionedRoutes(routes)
            self._router.routes = routes
        self._routes, self._version = routes, routes.version
        self._claims = lean_claims(routes)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Coroutine[Any, Any, None]:
        # a plain function returning the coroutine to await (the route's, or the router's): the
        # router awaits it directly, one coroutine less a request
        if scope["type"] == "http":
            routes = self._router.routes
            if routes is not self._routes or routes.version != self._version:
                self.refresh()
            path: str = scope["path"]
            root_path: str | None = scope.get("root_path")
            if root_path and path.startswith(root_path) and path[len(root_path) : len(root_path) + 1] == "/":
                path = path[len(root_path) :]  # Starlette's route path under a mount (get_route_path)
            claim = self._claims.get(path)
            if claim is not None and scope["method"] in claim[1] and _TELEMETRY_SCOPE_KEY not in scope:
                route = claim[0]
                if "router" not in scope:
                    scope["router"] = self._router
                scope["route"] = route
                scope["endpoint"] = route.endpoint
                params = scope.get("path_params")
                scope["path_params"] = dict(params) if params else {}
                return route.serve_directly(scope, receive, send)
        return self._next(scope, receive, send)


def claim_lean_paths(app: Any) -> None:
    """Install (or refresh) the :class:`RouterClaim` of ``app``'s router; an app without a
    Starlette router, or whose router has middleware of its own, is left as it is."""
    router: Any = getattr(app, "router", None)
    stack: Any = getattr(router, "middleware_stack", None)
    if isinstance(stack, RouterClaim):
        stack.refresh()
        return
    if stack is None or stack != getattr(router, "app", None) or not isinstance(getattr(router, "routes", None), list):
        return
    claim = RouterClaim(router, stack)
    if claim._claims:  # pyright: ignore[reportPrivateUsage]
        router.middleware_stack = claim
