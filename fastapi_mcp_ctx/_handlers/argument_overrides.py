"""``app.dependency_overrides`` for a graph whose dependencies take arguments.

FastAPI looks an override up by the callable its graph holds; a dependency declaring arguments is
held as its wrapper (``_handlers.arguments``), so the solver gets :func:`overrides_provider`'s view:
it maps a wrapper back to the original the app overrides, and gives FastAPI the override as
another wrapper whose plain parameters are filled from the call's arguments by name and validated
with the override's own annotations (read per call, as FastAPI reads overrides; each override is
walked once and remembered). An override's parameter that names no argument of the handler gets
its own default; without one it is a call-time :class:`~fastapi_mcp_ctx.errors.ToolError` naming
the override, the parameter and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError as PydanticValidationError

from ..errors import ToolError
from .argument_fields import argument_model
from .arguments import ArgumentGraph, CallArguments, Declarer, Source, Walker
from .parameters import callable_name

__all__ = ["overrides_provider"]

MAX_REMEMBERED: Final = 256
"""Overrides walked and kept per handler; beyond that the memory starts again (tests that build
a new override per test would otherwise grow it without bound)."""


def _describe(exc: PydanticValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in errors[:10])


def _at_call(graph: ArgumentGraph, override: Any, original: Any) -> Walker:
    names = set(graph.names)

    def take(declarer: Declarer, _: Any) -> Source:
        missing = [f.param for f in declarer.fields if f.name not in names and f.required]
        if missing:
            raise ToolError(
                f"{graph.owner}: the dependency override {callable_name(override)!r} of {callable_name(original)!r} takes"
                f" {missing[0]!r}, which is no argument of it: add {missing[0]!r} to {callable_name(original)!r}'s"
                " signature (so it is an argument), or give it a default in the override",
                code=-32603,
                reason="invalid_override",
            )
        kept = tuple(f for f in declarer.fields if f.name in names)
        model = declarer.built if len(kept) == len(declarer.fields) else argument_model(f"override_{callable_name(override)}", kept) if kept else None
        declarer.fields = kept

        def values(bound: CallArguments) -> dict[str, Any]:
            if model is None:
                return {}
            try:
                own = bound.graph.validate(model, bound.raw)
            except PydanticValidationError as exc:
                raise ToolError(
                    f"Invalid arguments for {graph.owner}: {_describe(exc)}", code=-32602, reason="invalid_arguments"
                ) from exc
            return {f.param: getattr(own, f.param) for f in declarer.fields}

        return values

    registered = graph.walker
    return Walker(registered.owner, registered.allow_path, registered.context_type, take, memo=dict(registered.memo))


def _converted(graph: ArgumentGraph, original: Any, override: Any) -> Any:
    key = (id(original), id(override))
    known = graph.overrides.get(key)
    if known is not None:
        return known[2]
    walker = _at_call(graph, override, original)
    walker.memo.pop(id(override), None)  # the override itself is walked as a dependency of its own
    converted = walker.wrap(override, f"dependency override {callable_name(override)!r}")
    if len(graph.overrides) >= MAX_REMEMBERED:
        graph.overrides.clear()
    graph.overrides[key] = (original, override, converted)
    return converted


_MISSING: Final = object()


class _View:
    """The ``dependency_overrides`` FastAPI reads (``bool()``, ``.get(call, default)``)."""

    __slots__ = ("_graph", "_overrides")

    def __init__(self, overrides: Mapping[Any, Any], graph: ArgumentGraph) -> None:
        self._overrides = overrides
        self._graph = graph

    def __bool__(self) -> bool:
        return bool(self._overrides)

    def get(self, call: Any, default: Any = None) -> Any:
        known = self._graph.walker.originals.get(id(call))
        original = known[1] if known is not None else call
        override = self._overrides.get(original, _MISSING)
        if override is _MISSING:
            return default
        return _converted(self._graph, original, override)


class _Provider:
    __slots__ = ("dependency_overrides",)

    def __init__(self, view: _View) -> None:
        self.dependency_overrides = view


def overrides_provider(app: Any, graph: ArgumentGraph) -> Any:
    """What ``solve`` takes as ``dependency_overrides_provider`` for ``graph``'s handler when
    ``app`` has ``dependency_overrides`` (without any, ``app`` itself is passed): the view above."""
    return _Provider(_View(app.dependency_overrides, graph))

