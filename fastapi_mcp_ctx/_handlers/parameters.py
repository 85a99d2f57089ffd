"""Every parameter of a handler, or of a dependency in its graph, classified once at registration.

FastAPI's own rule, with the call's arguments in the place of the request's parameters
(DESIGN decision 13): a parameter is

- a **dependency**: a ``Depends(...)`` / ``Security(...)`` marker (default or ``Annotated``), solved
  by FastAPI; ``Depends()`` without a callable uses the annotation, as in FastAPI;
- **FastAPI's**: a ``Query()`` / ``Header()`` / ``Cookie()`` marker (read from the HTTP request) or a
  ``Request`` / ``HTTPConnection`` / ``WebSocket`` / ``BackgroundTasks`` / ``SecurityScopes`` /
  ``Response`` annotation;
- an **argument** of the tool (resource template variable, prompt argument): any other parameter,
  a ``Body()`` marker (the explicit spelling), and for a resource a ``Path()`` marker (template
  variables are what FastAPI calls path parameters).

What fits none is refused here, naming the handler, the parameter and the fix: ``Path()`` outside
a resource, ``Form()`` / ``File()``, a ``Context`` in a dependency's signature without
``Depends(mcp_context)`` (issue 22), and what would silently become a required argument although a
context was meant: another SDK's ``Context``, ``Context | None``, an unannotated ``ctx`` / ``context``.
An argument whose type has no JSON Schema is refused where
its field is built (``_handlers.arguments``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_origin

from fastapi import params

from .._fastapi_compat import base_type, is_special_type, markers

__all__ = ["Classified", "callable_name", "classify", "typed_signature"]

Kind = Literal["argument", "dependency", "fastapi"]


@dataclass(frozen=True, slots=True)
class Classified:
    """One parameter's kind; for a dependency its ``marker`` and the ``dependency`` it calls."""

    kind: Kind
    marker: params.Depends | None = None
    dependency: Callable[..., Any] | None = None


def callable_name(call: Any) -> str:
    """A dependency's name for messages: its ``__name__``, or its class's."""
    name = getattr(call, "__name__", None)
    return name if isinstance(name, str) else type(call).__name__


def typed_signature(call: Callable[..., Any]) -> inspect.Signature:
    """``call``'s signature with string annotations resolved (``from __future__ import annotations``
    modules), as FastAPI resolves them; an annotation that does not resolve stays as written."""
    signature = inspect.signature(call)
    target: Any = call
    while isinstance(target, functools.partial):
        target = target.func  # pyright: ignore[reportUnknownMemberType]
    if inspect.isclass(target):
        target = target.__init__
    elif not inspect.isroutine(target):
        target = type(target).__call__ if callable(target) else target
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception:  # an unresolvable name: FastAPI's own error follows when it builds the graph
        hints = {}
    return signature.replace(parameters=[p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()])


def _is_context(annotation: Any, context_type: type) -> bool:
    base = base_type(annotation)
    origin = get_origin(base) or base
    return inspect.isclass(origin) and issubclass(origin, context_type)


def classify(parameter: inspect.Parameter, *, where: str, allow_path: bool, context_type: type) -> Classified:
    """The kind of ``parameter`` (annotation already resolved); ``where`` names its owner in
    errors (``"tool 'x'"``, ``"dependency 'load_item' of tool 'x'"``); ``allow_path``: a resource's
    ``Path()`` names a template variable; ``context_type``: the ``Context`` class (passed in by the
    registration modules, so that this classifier stays below ``context.py`` in the import graph).

    Raises:
        ValueError: ``Path()`` outside a resource, ``Form()`` / ``File()``, a ``Context`` parameter
            of a dependency without ``Depends(mcp_context)``, an optional ``Context``, another
            library's ``Context`` (the official SDK's, FastMCP's), an unannotated ``ctx`` / ``context``.
    """
    found = markers(parameter)
    for marker in found:
        if isinstance(marker, params.Depends):
            dependency = marker.dependency if marker.dependency is not None else base_type(parameter.annotation)
            if _is_context(parameter.annotation, context_type) and (marker.dependency is None or dependency is context_type):
                raise ValueError(_context_message(parameter, where))
            return Classified("dependency", marker, dependency)
    for marker in found:
        if isinstance(marker, params.Path):
            if allow_path:
                return Classified("argument")
            base = base_type(parameter.annotation)
            label = getattr(base, "__name__", "int") if base is not inspect.Parameter.empty else "int"
            raise ValueError(
                f"{where}: parameter {parameter.name!r} is declared Path(), which names a resource template"
                " variable; a tool or prompt argument is a plain parameter (or Body() to say so explicitly)."
                f" To keep a constraint such as Path(ge=1) for both REST and MCP, write"
                f" `{parameter.name}: Annotated[{label}, Field(ge=1)]` (from pydantic import Field): FastAPI still reads"
                " it from the URL path of a REST route, and the tool's input schema carries it"
            )
        if isinstance(marker, params.Param):
            return Classified("fastapi")
        if isinstance(marker, params.Body):
            if type(marker) is not params.Body:
                raise ValueError(
                    f"{where}: parameter {parameter.name!r} is declared {type(marker).__name__}(), but an MCP call has no"
                    " form body: make it a plain parameter (an argument) or Body()"
                )
            return Classified("argument")
    if is_special_type(parameter.annotation):
        return Classified("fastapi")
    if _is_context(parameter.annotation, context_type):
        raise ValueError(_context_message(parameter, where))
    _refuse_context_lookalike(parameter, where, context_type)
    return Classified("argument")


def _union_members(annotation: Any) -> tuple[Any, ...]:
    """The classes of ``annotation`` (``Annotated`` stripped; each member of a ``X | None`` union)."""
    base = base_type(annotation)
    if get_origin(base) in (typing.Union, types.UnionType):
        return tuple(base_type(arg) for arg in typing.get_args(base) if arg is not type(None))
    return (base,)


def _own_data_type(cls: type) -> bool:
    """An application's own argument type that happens to be called ``Context`` (a pydantic model
    or dataclass outside the MCP SDKs): a real argument, kept."""
    root = cls.__module__.partition(".")[0]
    is_model = hasattr(cls, "model_json_schema")
    return root not in ("mcp", "fastmcp") and (is_model or dataclasses.is_dataclass(cls))


def _refuse_context_lookalike(parameter: inspect.Parameter, where: str, context_type: type) -> None:
    """Refuse what would silently become a required argument although a context was meant: an
    optional ``Context`` (``Context | None = None``), another library's ``Context`` (the official
    SDK's, FastMCP's), an unannotated ``ctx`` / ``context``."""
    fix = "Declare it `{name}: McpContext` (from fastapi_mcp_ctx import McpContext)"
    alt = ", or `{name}: Context = Depends(mcp_context)` (from fastapi_mcp_ctx import Context, mcp_context)"
    name = parameter.name
    if parameter.annotation is inspect.Parameter.empty:
        if name in ("ctx", "context"):
            raise ValueError(
                f"{where}: parameter {name!r} has no annotation, so it would be a required argument of the call, not the"
                f" MCP context. {fix.format(name=name)}{alt.format(name=name)}; if it is an argument, give it a type"
            )
        return
    members = _union_members(parameter.annotation)
    ours = [m for m in members if inspect.isclass(get_origin(m) or m) and issubclass(get_origin(m) or m, context_type)]
    if ours:
        raise ValueError(
            f"{where}: parameter {name!r} is an optional Context (Context | None); every call has its context, so it"
            f" needs neither None nor a default. {fix.format(name=name)}"
        )
    for member in members:
        if inspect.isclass(member) and member.__name__ == "Context" and not _own_data_type(member):
            raise ValueError(
                f"{where}: parameter {name!r} is annotated with {member.__module__}.Context, not fastapi_mcp_ctx's: it would"
                f" be a required argument of the call. {fix.format(name=name)}{alt.format(name=name)}"
            )


def _context_message(parameter: inspect.Parameter, where: str) -> str:
    return (
        f"{where}: parameter {parameter.name!r} is a Context without Depends(mcp_context); FastAPI would treat it as"
        f" a request field. Declare it `{parameter.name}: Context = Depends(mcp_context)` or `{parameter.name}: McpContext`"
        " (from fastapi_mcp_ctx import McpContext, mcp_context)"
    )
