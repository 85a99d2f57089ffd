"""Tool registration: a FastAPI-style function becomes an MCP tool definition.

The plain parameters (everything FastAPI does not resolve), the handler's and those of its
dependencies (``_handlers.arguments``), become a pydantic model: it validates ``arguments`` and
gives ``inputSchema`` (JSON Schema 2020-12, descriptions from ``Annotated[..., Field(description=...)]``). The return annotation gives ``outputSchema``;
a non-object output (``int``, ``str``, ``list``...) is wrapped as ``{"result": value}``, its
``outputSchema`` marked ``"x-fastmcp-wrap-result": true`` (:data:`WRAP_MARKER`: FastMCP's client
then gives back ``42``, not ``Root(result=42)``; an unknown keyword other validators ignore).
Spec 2025-11-25 ``server/tools`` §Tool, §Output Schema.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import sys
import types as pytypes
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Final, Union, get_args, get_origin

from fastapi import Depends, params
from fastapi.dependencies.models import Dependant
from pydantic import BaseModel, ConfigDict, PydanticUserError, TypeAdapter

from .._fastapi_compat import build_dependant, dependency_of, takes_response
from ..context import Context, mcp_context
from ..contracts import ErrorContract
from .argument_fields import strict_json, validates_alike
from .arguments import build_arguments
from .parameters import classify
from .results import plain_output
from .tool_declarations import declare
from .tool_def import ToolDef

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["WRAP_MARKER", "SignatureParts", "ToolRegistry", "build_dependants", "build_tool", "split_signature"]

logger = logging.getLogger("fastapi_mcp_ctx")

WRAP_MARKER: Final = "x-fastmcp-wrap-result"
"""The outputSchema keyword marking a wrapped non-object output (FastMCP's name; its client unwraps ``result``)."""
_NAME: Final = re.compile(r"^[A-Za-z0-9_.\-/]{1,128}\Z")
_HEADER_TOKEN: Final = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
# Core-schema node types whose strict validation builds a new value of exactly the declared
# types (containers rebuilt, scalars checked): serializing that value cannot meet an unexpected
# one. Models, dataclasses, custom validators/serializers and arbitrary types pass instances
# through as they are (a model's field may have been reassigned to anything), so outputs
# holding them keep pydantic's warnings="error" check at serialization, a few µs a call.
_REBUILT_BY_VALIDATION: Final = frozenset(
    {
        "any", "none", "bool", "int", "float", "str", "bytes", "literal", "enum", "nullable", "union",
        "list", "tuple", "set", "frozenset", "dict", "date", "time", "datetime", "timedelta", "decimal", "uuid",
    }
)  # fmt: skip


@functools.cache
def _content_types() -> tuple[type, ...]:
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return (types.TextContent, types.ImageContent, types.AudioContent, types.EmbeddedResource, types.ResourceLink, types.CallToolResult)


def _is_content_annotation(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin in (list, Sequence, typing.Sequence):
        return all(_is_content_annotation(a) for a in get_args(annotation))
    if origin is Union or origin is pytypes.UnionType:
        return all(_is_content_annotation(a) for a in get_args(annotation))
    # without mcp_types imported, no class can be one of its models (nor subclass one)
    return inspect.isclass(annotation) and "mcp_types" in sys.modules and issubclass(annotation, _content_types())


def _clean_schema(schema: dict[str, Any], *, arguments: bool = False) -> dict[str, Any]:
    schema.pop("title", None)
    schema.setdefault("type", "object")
    if arguments:
        schema.setdefault("properties", {})
    return schema


def _rebuilt_by_validation(schema: Any) -> bool:
    """True when every node of a core schema is in ``_REBUILT_BY_VALIDATION`` (metadata aside)."""
    if isinstance(schema, dict):
        node: dict[str, Any] = schema  # pyright: ignore[reportUnknownVariableType]
        kind = node.get("type")
        if isinstance(kind, str) and kind not in _REBUILT_BY_VALIDATION:
            return False
        return all(_rebuilt_by_validation(value) for key, value in node.items() if key != "metadata")
    if isinstance(schema, (list, tuple)):
        items: list[Any] | tuple[Any, ...] = schema  # pyright: ignore[reportUnknownVariableType]
        return all(_rebuilt_by_validation(item) for item in items)
    return True


def _output(annotation: Any) -> tuple[TypeAdapter[Any] | None, dict[str, Any] | None, bool]:
    if annotation is inspect.Signature.empty or annotation is None or annotation is type(None):
        return None, None, False
    if _is_content_annotation(annotation):
        return None, None, False
    try:  # keep inf/nan as floats in Any-typed parts so shaping can refuse them (never null)
        adapter: TypeAdapter[Any] = TypeAdapter(annotation, config=ConfigDict(ser_json_inf_nan="constants"))
    except PydanticUserError:  # a model, dataclass or TypedDict: its own config decides
        adapter = TypeAdapter(annotation)
    schema = adapter.json_schema(mode="serialization")
    if schema.get("type") == "object" or (inspect.isclass(annotation) and issubclass(annotation, BaseModel)):
        return adapter, _clean_schema(schema), False
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {"type": "object", "properties": {"result": schema}, "required": ["result"], WRAP_MARKER: True}
    if defs:
        wrapped["$defs"] = defs
    return adapter, wrapped, True


def _header_params(schema: dict[str, Any], tool: str) -> dict[str, str]:
    found: dict[str, str] = {}
    properties: dict[str, Any] = schema.get("properties", {})
    for prop, raw in properties.items():
        sub: dict[str, Any] = raw if isinstance(raw, dict) else {}  # pyright: ignore[reportUnknownVariableType]
        token = sub.get("x-mcp-header")
        if token is None:
            continue
        if not isinstance(token, str) or not _HEADER_TOKEN.fullmatch(token):
            raise ValueError(f"tool {tool!r}: x-mcp-header of {prop!r} must be an RFC 9110 token")
        kind = sub.get("type")
        if kind not in ("string", "integer", "boolean"):
            raise ValueError(f"tool {tool!r}: x-mcp-header property {prop!r} must be string, integer or boolean")
        if token.lower() in found.values():
            raise ValueError(f"tool {tool!r}: duplicate x-mcp-header token {token!r}")
        found[prop] = token.lower()
    return found


@dataclass(frozen=True, slots=True)
class SignatureParts:
    """A handler's signature split the way every handler kind (tool, resource, prompt,
    completer) uses it: ``arguments`` are its argument parameters (annotations resolved),
    ``plain`` maps each to ``(annotation, default)`` (``...`` when required);
    ``dependency_parameters`` are FastAPI's; ``graph`` the arguments of the whole dependency
    graph (``_handlers.arguments``) once :func:`build_dependants` has walked it."""

    signature: inspect.Signature
    hints: dict[str, Any]
    plain: dict[str, tuple[Any, Any]]
    dependency_parameters: list[inspect.Parameter]
    arguments: list[inspect.Parameter]


def _context_by_type(parameter: inspect.Parameter) -> inspect.Parameter:
    """``ctx: Context`` (and ``ctx: Context = Depends()``, which FastAPI would turn into a call of
    the class) mean ``Depends(mcp_context)``, as ``request: Request`` needs no marker: the
    spelling of FastMCP and the official SDK works unchanged. A ``Depends(other)`` is kept."""
    annotation = parameter.annotation
    metadata = get_args(annotation)[1:] if get_origin(annotation) is Annotated else ()
    base = get_args(annotation)[0] if metadata else annotation
    origin = get_origin(base) or base
    if not (inspect.isclass(origin) and issubclass(origin, Context)):
        return parameter
    markers = [m for m in (parameter.default, *metadata) if isinstance(m, params.Depends)]
    if any(m.dependency is not None for m in markers):
        return parameter
    if parameter.default is not inspect.Parameter.empty and not markers:
        return parameter  # a plain default on a Context parameter: refused by classify
    return parameter.replace(annotation=base, default=Depends(mcp_context))


def _unresolved_annotation(exc: NameError, signature: inspect.Signature, what: str) -> NameError:
    """``typing``'s bare ``NameError`` of an annotation that does not resolve, as one naming the
    handler, the parameter (or the return annotation) and the fix. Annotations written as strings
    (``from __future__ import annotations``, or quoted) are resolved in the module's globals when
    the handler is registered, so a type defined inside a function, or imported only under
    ``if TYPE_CHECKING:``, is not found."""
    missing = exc.name
    annotated = [(f"parameter {p.name!r}", p.annotation) for p in signature.parameters.values()]
    annotated.append(("the return annotation", signature.return_annotation))
    pattern = re.compile(rf"\b{re.escape(missing)}\b") if missing else None
    found = [(label, text) for label, text in annotated if isinstance(text, str) and pattern is not None and pattern.search(text)]
    where = ", ".join(f"{label} ({text!r})" for label, text in found) or "an annotation"
    name = repr(missing) if missing else "a name"
    return NameError(
        f"{what}: {where} names {name}, which the function's module does not define; string annotations"
        " (every one under `from __future__ import annotations`) are resolved from the module's globals at"
        f" registration. Define or import {name} at module level (not inside a function, nor only under"
        " `if TYPE_CHECKING:`), or drop `from __future__ import annotations` where the type is local."
    )


def split_signature(handler: Callable[..., Any], what: str, *, allow_path: bool = False) -> SignatureParts:
    """Split ``handler``'s parameters into arguments and dependencies (``what`` names the
    handler in errors, e.g. ``"tool 'add'"``; ``allow_path``: a resource's ``Path()`` names a
    template variable). Classification: ``_handlers.parameters.classify``.

    Raises:
        ValueError: a ``*args`` / ``**kwargs`` parameter; see ``classify``.
        NameError: an annotation names a type the handler's module does not define (see
            :func:`_unresolved_annotation`).
    """
    signature = inspect.signature(handler)
    try:
        hints = typing.get_type_hints(handler, include_extras=True)
    except NameError as exc:
        raise _unresolved_annotation(exc, signature, what) from exc
    plain: dict[str, tuple[Any, Any]] = {}
    arguments: list[inspect.Parameter] = []
    dependency_parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ValueError(f"{what}: *args / **kwargs parameters are not supported")
        resolved = _context_by_type(parameter.replace(annotation=hints.get(parameter.name, parameter.annotation)))
        if classify(resolved, where=what, allow_path=allow_path, context_type=Context).kind != "argument":
            dependency_parameters.append(resolved)
            continue
        arguments.append(resolved)
        annotation = resolved.annotation if resolved.annotation is not inspect.Parameter.empty else Any
        default = resolved.default if resolved.default is not inspect.Parameter.empty else ...
        plain[parameter.name] = (annotation, default)
    return SignatureParts(signature, hints, plain, dependency_parameters, arguments)


def build_dependants(
    name: str, dependency_parameters: Sequence[inspect.Parameter], dependencies: Sequence[params.Depends], path: str
) -> tuple[Dependant | None, tuple[str, ...], Dependant | None]:
    """``(dependant, context_params, lean_dependant)`` of a handler (see :class:`ToolDef`);
    ``dependency_parameters`` and ``dependencies`` as :func:`~._handlers.arguments.build_arguments`
    rewrote them."""
    context_params = tuple(p.name for p in dependency_parameters if dependency_of(p) is mcp_context)
    dependant = build_dependant(name, dependency_parameters, dependencies, path)
    if not context_params:
        return dependant, context_params, dependant
    lean_parameters = [p for p in dependency_parameters if p.name not in context_params]
    return dependant, context_params, build_dependant(name, lean_parameters, dependencies, path)


def build_tool(
    handler: Callable[..., Any],
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    annotations: types.ToolAnnotations | dict[str, Any] | None,
    input_schema: dict[str, Any] | None,
    dependencies: Sequence[params.Depends],
    meta: dict[str, Any] | None,
    icons: list[dict[str, Any]] | None,
    path: str,
    enrichment: Any = None,
    errors: Sequence[ErrorContract] | None = None,
) -> ToolDef:
    """Turn ``handler`` into a :class:`ToolDef`.

    Raises:
        ValueError: a tool name outside ``^[A-Za-z0-9_.\\-/]{1,128}$``, a ``*args``/``**kwargs``
            parameter, a parameter that is neither an argument with a JSON Schema nor a dependency
            (anywhere in the graph), an argument declared with two types
            (``_handlers.arguments.build_arguments``), an invalid ``x-mcp-header`` annotation, an ``enrichment=`` that cannot
            extend the output schema, or ``errors=`` that are not unique ``ErrorContract``s (or
            miss a reason a ``Context[Literal[...]]`` parameter names).
    """
    tool_name = name or handler.__name__
    if not _NAME.fullmatch(tool_name):
        raise ValueError(f"invalid tool name {tool_name!r}: use 1-128 characters of [A-Za-z0-9_.-/]")
    owner = f"tool {tool_name!r}"
    parts = split_signature(handler, owner)
    signature, hints = parts.signature, parts.hints
    graph = build_arguments(owner, f"{tool_name}_arguments", parts.arguments, parts.dependency_parameters, dependencies, context_type=Context, validate=strict_json)
    dependency_parameters = graph.dependency_parameters
    model = graph.model
    schema = input_schema if input_schema is not None else _clean_schema(model.model_json_schema(), arguments=True)
    plain_arguments = graph.flat and validates_alike(model)
    del model
    graph.deferred.drop()  # built again at the tool's first call: an idle tool holds no model (~12 kB)
    adapter, output_schema, wrap = _output(hints.get("return", signature.return_annotation))
    contexts = [p.annotation for p in dependency_parameters if dependency_of(p) is mcp_context]
    declared = declare(f"tool {tool_name!r}", output_schema, meta, enrichment, errors, contexts)  # enrichment=, errors=
    output_schema, meta = declared.output_schema, declared.meta
    listing: dict[str, Any] = {"name": tool_name}
    if title is not None:
        listing["title"] = title
    doc = description if description is not None else inspect.getdoc(handler)
    if doc:
        listing["description"] = doc
    else:  # the model chooses tools by their description: say so once, at registration
        logger.warning(
            "tool %r has no description (clients see description: null and the model has only its name to go by): "
            "give the function %r a docstring or pass description=...",
            tool_name,
            getattr(handler, "__qualname__", tool_name),
        )
    listing["inputSchema"] = schema
    if output_schema is not None:
        listing["outputSchema"] = output_schema
    if annotations is not None:
        listing["annotations"] = (
            annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
            if isinstance(annotations, BaseModel)
            else dict(annotations)
        )
    if icons:
        listing["icons"] = icons
    if meta:
        listing["_meta"] = meta
    dependant, context_params, lean_dependant = build_dependants(tool_name, dependency_parameters, graph.dependencies, path)
    return ToolDef(
        name=tool_name,
        handler=handler,
        is_async=inspect.iscoroutinefunction(handler),
        argument_names=tuple(parts.plain),
        arguments=graph,
        dependant=dependant,
        context_params=context_params,
        lean_dependant=lean_dependant,
        output_adapter=adapter,
        output_passthrough=adapter is not None and not _rebuilt_by_validation(adapter.core_schema),
        wrap_output=wrap,
        header_params=_header_params(schema, tool_name),
        listing=listing,
        enrichment=declared.enrichment,
        contracts=declared.contracts,
        plain_arguments=plain_arguments,
        plain_output=plain_output(adapter, wrap),
        response_free=not takes_response(dependant),
        model_arguments=graph.flat and tuple(f.param for f in graph.deferred.fields) == tuple(parts.plain),
    )


class ToolRegistry:
    """Registered tools in registration order (``tools/list`` order is deterministic).

    ``version`` increases on every change so cached pages can be invalidated.
    """

    def __init__(self) -> None:
        self._tools: dict[str, ToolDef] = {}
        self.version = 0
        self._task_tools = 0  # tools declared task="optional"/"required": any_task() per call, not a walk

    def add(self, tool: ToolDef) -> None:
        """Register ``tool``; raises ValueError when the name is taken."""
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self.version += 1
        self._task_tools += tool.task is not None

    def remove(self, name: str) -> bool:
        """Unregister a tool; returns False when it was not registered."""
        tool = self._tools.pop(name, None)
        if tool is None:
            return False
        self.version += 1
        self._task_tools -= tool.task is not None
        return True

    def get(self, name: str) -> ToolDef | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def tools(self) -> list[ToolDef]:
        """Every tool, in registration order."""
        return list(self._tools.values())

    def listings(self) -> list[dict[str, Any]]:
        """Every tool's ``Tool`` object, in registration order."""
        return [tool.listing for tool in self._tools.values()]

    def __len__(self) -> int:
        return len(self._tools)

    def scopes(self) -> set[str]:
        """Every scope some registered tool needs (the metadata's ``scopes_supported``)."""
        return {scope for tool in self._tools.values() for scope in tool.scopes}

    def any_task(self) -> bool:
        """True when a registered tool was declared ``task="optional"`` or ``"required"``."""
        return self._task_tools > 0

    def any_scoped(self) -> bool:
        """Whether some tool needs a scope (``tools/list`` is filtered per caller only then)."""
        return any(tool.scopes for tool in self._tools.values())
