"""``completion/complete``: completers for prompt arguments and resource template variables.

A completer is a FastAPI-style function like any handler (``Depends``, ``Security``, the
call's ``Context``); its plain parameters are filled by name from the request: ``value`` (the
partial text typed so far), ``argument`` (the argument's name) and ``arguments`` (the
``context.arguments`` already resolved, ``{name: str}``). It returns the suggestions: a list
of strings, or a ``Completion`` (``values``, ``total``, ``has_more``).

The result keeps the spec's bounds (2025-11-25 ``server/utilities/completion`` §Completion
Results; known fault B43): at most 100 values; beyond that ``hasMore: true`` and ``total``
the full count; a ``total`` smaller than what came back is raised to it. An unknown prompt or
template is ``-32602``; an argument without a completer gets an empty completion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from fastapi import params

from ..errors import InvalidParamsError
from .feature_handler import FeatureHandler, build_handler

if TYPE_CHECKING:
    pass

__all__ = ["MAX_VALUES", "build_completer", "parse_request", "shape_completion"]

MAX_VALUES: Final = 100
"""Values one completion carries at most (spec: ``values`` holds at most 100 items)."""
_INPUTS: Final = frozenset({"value", "argument", "arguments"})


def build_completer(func: Callable[..., Any], *, name: str, dependencies: Sequence[params.Depends], path: str) -> FeatureHandler:
    """The completer of ``name`` (``"<prompt or template>:<argument>"``, for messages).

    Raises:
        ValueError: a plain parameter other than ``value``, ``argument``, ``arguments``.
    """
    completer = build_handler(func, kind="completer", name=name, dependencies=dependencies, path=path)
    unknown = sorted(set(completer.inputs) - _INPUTS)
    if unknown:
        raise ValueError(f"completer {name!r}: parameters {unknown} are not dependencies; a completer takes value, argument, arguments")
    return completer


def parse_request(params_: Mapping[str, Any]) -> tuple[str, str, str, str, dict[str, str]]:
    """``(ref type, prompt name or template, argument name, value, context arguments)``.

    Raises:
        InvalidParamsError: a missing or malformed ``ref`` / ``argument`` / ``context``.
    """
    ref = params_.get("ref")
    argument = params_.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise InvalidParamsError("completion/complete requires 'ref' and 'argument' objects")
    ref_: dict[str, Any] = ref  # pyright: ignore[reportUnknownVariableType]
    argument_: dict[str, Any] = argument  # pyright: ignore[reportUnknownVariableType]
    kind = ref_.get("type")
    target = ref_.get("name") if kind == "ref/prompt" else ref_.get("uri") if kind == "ref/resource" else None
    if not isinstance(target, str):
        raise InvalidParamsError("completion/complete 'ref' must be {type: 'ref/prompt', name} or {type: 'ref/resource', uri}")
    name, value = argument_.get("name"), argument_.get("value")
    if not isinstance(name, str) or not isinstance(value, str):
        raise InvalidParamsError("completion/complete 'argument' must be {name: str, value: str}")
    context: Any = params_.get("context")
    if context is not None and not isinstance(context, dict):
        raise InvalidParamsError("completion/complete 'context' must be an object")
    holder: dict[str, Any] = context or {}  # pyright: ignore[reportUnknownVariableType]
    resolved: Any = holder.get("arguments") or {}
    if not isinstance(resolved, dict):
        raise InvalidParamsError("completion/complete 'context.arguments' must be an object of strings")
    given: dict[str, Any] = resolved  # pyright: ignore[reportUnknownVariableType]
    if not all(isinstance(v, str) for v in given.values()):
        raise InvalidParamsError("completion/complete 'context.arguments' must be an object of strings")
    return str(kind), target, name, value, dict(given)


def shape_completion(value: Any) -> dict[str, Any]:
    """``{"completion": {"values": [...<=100], "total"?: int, "hasMore"?: bool}}``.

    Raises:
        TypeError: the completer returned neither strings nor a ``Completion`` (its bug).
    """
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    total: int | None = None
    has_more: bool | None = None
    if isinstance(value, types.Completion):
        values: list[Any] = list(value.values)
        total, has_more = value.total, value.has_more
    elif isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        items: Iterable[Any] = value  # pyright: ignore[reportUnknownVariableType]
        values = list(items)
    else:
        kind: str = type(value).__name__  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        raise TypeError(f"a completer returns a list of strings or a Completion, not {kind}")
    if not all(isinstance(v, str) for v in values):
        raise TypeError("a completer's values must be strings")
    count = len(values)
    completion: dict[str, Any] = {"values": values[:MAX_VALUES]}
    if total is not None or count > MAX_VALUES:
        completion["total"] = max(total or 0, count)
    if count > MAX_VALUES or has_more or (total is not None and total > min(count, MAX_VALUES)):
        completion["hasMore"] = True
    elif has_more is not None:
        completion["hasMore"] = False
    return {"completion": completion}
