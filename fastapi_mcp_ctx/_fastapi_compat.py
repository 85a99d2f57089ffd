"""Every touch of FastAPI's dependency internals lives here, its routing internals in
:mod:`._fastapi_routes` (DESIGN.md decision 3).

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
from collections.abc import AsyncGenerator, Callable, Sequence, Sized
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Annotated, Any, Final, Literal, get_args, get_origin

from fastapi import params
from fastapi.background import BackgroundTasks
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import (
    get_dependant,
    get_parameterless_sub_dependant,
    solve_dependencies,
)
from fastapi.security import SecurityScopes
from starlette.datastructures import QueryParams
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.websockets import WebSocket

__all__ = [
    "UNSENT_RESPONSE",
    "SolvedCall",
    "Stacks",
    "base_type",
    "blank_response",
    "build_dependant",
    "call_kind",
    "close_solve",
    "dependency_of",
    "is_dependency_parameter",
    "is_request_type",
    "is_special_type",
    "markers",
    "open_solve",
    "solve",
    "takes_response",
    "with_dependency",
]

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
