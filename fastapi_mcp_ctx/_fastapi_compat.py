"""Every touch of FastAPI internals lives here (DESIGN.md decision 3).

FastAPI's own solver resolves a tool's dependencies in process: ``get_dependant`` builds the
graph once at registration from a *dependencies-only* signature, ``solve_dependencies``
solves it per call with ``dependency_overrides_provider=app``. Yield dependencies are
entered on two ``AsyncExitStack`` objects stored under the scope keys FastAPI expects
(``fastapi_inner_astack`` / ``fastapi_function_astack``, plus the pre-0.121 ``fastapi_astack``)
and torn down when :func:`solve` exits, that is after the tool's result is produced.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import operator
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator, Sequence, Sized
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Annotated, Any, Final, Literal, get_args, get_origin

from fastapi import params
from fastapi import routing as fastapi_routing
from fastapi.background import BackgroundTasks
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import (
    get_dependant,
    get_parameterless_sub_dependant,
    solve_dependencies,
)
from fastapi.routing import APIRoute
from fastapi.security import SecurityScopes
from starlette.datastructures import QueryParams
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

__all__ = [
    "LEAN_SCOPE_KEY",
    "UNSENT_RESPONSE",
    "LeanRoute",
    "SolvedCall",
    "Stacks",
    "base_type",
    "blank_response",
    "build_dependant",
    "call_kind",
    "close_solve",
    "dependency_of",
    "flat_route_entries",
    "flat_routes",
    "is_dependency_parameter",
    "is_request_type",
    "is_special_type",
    "markers",
    "open_solve",
    "solve",
    "takes_response",
    "with_dependency",
]

LEAN_SCOPE_KEY = "fastapi_mcp_ctx.lean"
_SPECIAL_TYPES: tuple[type, ...] = (Request, HTTPConnection, WebSocket, BackgroundTasks, SecurityScopes, Response)


def _metadata(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) is Annotated:
        return get_args(annotation)[1:]
    return ()


def base_type(annotation: Any) -> Any:
    """``T`` of ``Annotated[T, ...]``, else ``annotation`` itself."""
    if get_origin(annotation) is Annotated:
        return get_args(annotation)[0]
    return annotation


def markers(parameter: inspect.Parameter) -> tuple[Any, ...]:
    """What FastAPI reads FastAPI markers from: the default, then the ``Annotated`` metadata."""
    return (parameter.default, *_metadata(parameter.annotation))


def with_dependency(marker: params.Depends, dependency: Callable[..., Any]) -> params.Depends:
    """A copy of ``marker`` (``Depends``/``Security``: ``use_cache``, ``scopes``, ``scope``... kept)
    calling ``dependency``: a dataclass in recent FastAPI, a plain class in 0.115."""
    if dataclasses.is_dataclass(marker):
        return dataclasses.replace(marker, dependency=dependency)
    copied = copy.copy(marker)
    copied.dependency = dependency
    return copied


CallKind = Literal["function", "coroutine", "generator", "async_generator"]


def call_kind(call: Callable[..., Any]) -> CallKind:
    """How FastAPI runs ``call`` as a dependency (its own rules: ``functools.partial`` and
    decorators unwrapped, a class is a plain function, an instance by its ``__call__``)."""
    target: Any = call
    while isinstance(target, functools.partial):
        target = target.func  # pyright: ignore[reportUnknownMemberType]
    target = inspect.unwrap(target)
    if inspect.isclass(target):
        return "function"
    if not inspect.isroutine(target):
        target = type(target).__call__ if callable(target) else target
    if inspect.isasyncgenfunction(target):
        return "async_generator"
    if inspect.isgeneratorfunction(target):
        return "generator"
    if inspect.iscoroutinefunction(target):
        return "coroutine"
    return "function"


def is_special_type(annotation: Any) -> bool:
    """True for the types FastAPI fills itself: ``Request``, ``HTTPConnection``, ``WebSocket``,
    ``BackgroundTasks``, ``SecurityScopes``, ``Response`` (and their subclasses)."""
    base = base_type(annotation)
    return inspect.isclass(base) and issubclass(base, _SPECIAL_TYPES)


def is_request_type(annotation: Any) -> bool:
    """True when FastAPI passes the ``Request`` to a parameter so annotated."""
    base = base_type(annotation)
    return inspect.isclass(base) and issubclass(base, Request)


def is_dependency_parameter(parameter: inspect.Parameter) -> bool:
    """True when FastAPI resolves this parameter (not a tool argument).

    That is: a ``Depends``/``Security`` or ``Header``/``Cookie``/``Query``/``Path`` marker as
    default or in ``Annotated`` metadata, or a ``Request``, ``HTTPConnection``,
    ``BackgroundTasks``, ``SecurityScopes`` or ``Response`` annotation.
    """
    markers = (parameter.default, *_metadata(parameter.annotation))
    if any(isinstance(m, (params.Depends, params.Param)) for m in markers):
        return True
    base = base_type(parameter.annotation)
    return inspect.isclass(base) and issubclass(base, _SPECIAL_TYPES)


def dependency_of(parameter: inspect.Parameter) -> Callable[..., Any] | None:
    """The callable of a plain ``Depends(...)`` marker on ``parameter`` (default or ``Annotated``),
    None for anything else (``Security``, ``Header``, no marker)."""
    for marker in (parameter.default, *_metadata(parameter.annotation)):
        if type(marker) is params.Depends:
            return marker.dependency
    return None


def build_dependant(
    name: str,
    dependency_parameters: Sequence[inspect.Parameter],
    dependencies: Sequence[params.Depends],
    path: str,
) -> Dependant | None:
    """Build the dependency graph of a tool once, at registration.

    Args:
        name: the tool name (used in FastAPI's error locations).
        dependency_parameters: the handler parameters FastAPI resolves.
        dependencies: ``dependencies=[Depends(...)]`` of the router then the tool, run first.
        path: the MCP endpoint path (for FastAPI's messages).
    Returns:
        The ``Dependant``, or None when the tool has no dependency at all (fast path).
    """
    if not dependency_parameters and not dependencies:
        return None

    def _signature_holder() -> None:  # the signature is replaced below
        return None

    _signature_holder.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in dependency_parameters]
    )
    _signature_holder.__name__ = f"tool_{name}"
    dependant = get_dependant(path=path, call=_signature_holder)
    for depends in reversed(dependencies):
        dependant.dependencies.insert(0, get_parameterless_sub_dependant(depends=depends, path=path))
    return dependant


@dataclass(slots=True)
class SolvedCall:
    """The outcome of solving one tool's dependencies.

    Attributes:
        values: keyword arguments for the handler's dependency parameters.
        errors: FastAPI validation errors (``Header`` missing...), empty on success.
    """

    values: dict[str, Any]
    errors: list[Any]


_NO_QUERY: Final = QueryParams(b"")
"""The query parameters of an empty query string (immutable: shared by every call's Request)."""
_BLANK_HEADER: tuple[bytes, bytes] = (b"content-length", b"0")
_new_response = Response.__new__


def blank_response() -> Response:
    """What ``Response()`` makes (status 200, empty body, ``content-length: 0``), without its
    ``__init__``'s rendering and header building: the response a tool's dependencies may set
    headers on, which nobody sends (a fresh one per call, as FastAPI's)."""
    response = _new_response(Response)
    response.status_code = 200
    response.background = None
    response.body = b""
    response.raw_headers = [_BLANK_HEADER]
    return response


UNSENT_RESPONSE: Final = blank_response()
"""One :func:`blank_response` shared by the solves of graphs where no dependency takes a
``Response`` (:func:`takes_response` False) and no ``dependency_overrides`` apply: the solver
hands its response only to such a parameter, so nobody reads or changes this one."""


def takes_response(dependant: Dependant | None) -> bool:
    """True when a dependency of ``dependant``'s graph (itself included) has a ``Response``
    parameter (FastAPI's ``response_param_name``); False for None."""
    if dependant is None:
        return False
    return dependant.response_param_name is not None or any(takes_response(sub) for sub in dependant.dependencies)


_entered: Callable[[AsyncExitStack[Any]], Sized] = operator.attrgetter("_exit_callbacks")
"""What an ``AsyncExitStack`` entered and will exit (contextlib's own deque; empty: nothing)."""

Stacks = tuple[AsyncExitStack[Any], AsyncExitStack[Any]]
"""FastAPI's two exit stacks of one solve: request-scoped, function-scoped."""


async def open_solve(
    dependant: Dependant, request: Request, overrides_provider: Any, background_tasks: BackgroundTasks, response: Response | None = None
) -> tuple[dict[str, Any], list[Any], Stacks]:
    """Solve ``dependant`` for one call: ``(values, errors, stacks)``, its yield dependencies
    entered on ``stacks``, which the caller hands to :func:`close_solve` once, whatever happens
    (a pair of functions, not an async context manager: no object per call; :func:`solve` is
    that form). The stacks go in ``request``'s scope under FastAPI's keys
    (``fastapi_inner_astack``, ``fastapi_function_astack``, the pre-0.121 ``fastapi_astack``).
    ``response`` collects headers a dependency sets through a ``Response`` parameter."""
    scope = request.scope
    if scope.get("query_string") == b"":  # the solver reads request.query_params: the empty one, parsed once
        vars(request).setdefault("_query_params", _NO_QUERY)
    request_stack: AsyncExitStack[Any] = AsyncExitStack()
    function_stack: AsyncExitStack[Any] = AsyncExitStack()
    scope["fastapi_inner_astack"] = request_stack
    scope["fastapi_astack"] = request_stack
    scope["fastapi_function_astack"] = function_stack
    try:
        solved = await solve_dependencies(
            request=request,
            dependant=dependant,
            body=None,
            background_tasks=background_tasks,
            response=response if response is not None else blank_response(),
            dependency_overrides_provider=overrides_provider,
            dependency_cache=None,
            async_exit_stack=request_stack,
            embed_body_fields=False,
        )
    except BaseException as exc:
        await close_solve((request_stack, function_stack), type(exc), exc, exc.__traceback__)  # tear down what was entered
        raise
    return solved.values, solved.errors, (request_stack, function_stack)


async def close_solve(stacks: Stacks, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
    """Tear down what :func:`open_solve` entered: function-scoped dependencies first, then
    request-scoped ones (FastAPI's order); the exception, if any, is thrown into each yield
    dependency as FastAPI does. True when a dependency suppressed it (an ``__aexit__``'s answer).
    An empty function stack (no function-scoped yield dependency: the common graph) is not
    exited: its exit does nothing."""
    request_stack, function_stack = stacks
    if not _entered(function_stack):
        return await request_stack.__aexit__(exc_type, exc, tb)
    try:
        suppressed = await function_stack.__aexit__(exc_type, exc, tb)
    except BaseException as raised:
        if not await request_stack.__aexit__(type(raised), raised, raised.__traceback__):
            raise
        return True
    if suppressed:
        exc_type, exc, tb = None, None, None
    return await request_stack.__aexit__(exc_type, exc, tb) or suppressed


@asynccontextmanager
async def solve(
    dependant: Dependant, request: Request, overrides_provider: Any, background_tasks: BackgroundTasks, response: Response | None = None
) -> AsyncGenerator[SolvedCall, None]:
    """:func:`open_solve` then :func:`close_solve` as an async context manager (the
    authentication graph's form): ``async with solve(dependant, request, app, background_tasks)
    as solved:`` gives a :class:`SolvedCall`; yield dependencies are torn down on exit."""
    values, errors, stacks = await open_solve(dependant, request, overrides_provider, background_tasks, response)
    try:
        yield SolvedCall(values, errors)
    except BaseException as exc:
        if not await close_solve(stacks, type(exc), exc, exc.__traceback__):
            raise
    else:
        await close_solve(stacks, None, None, None)


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
