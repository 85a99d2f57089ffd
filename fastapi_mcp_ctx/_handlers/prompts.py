"""Prompts: registration, ``prompts/list`` entries and the shape of ``prompts/get`` messages.

A prompt's plain parameters are its arguments (spec 2025-11-25 ``server/prompts``): each is
listed with ``required`` (no default) and the ``description`` of
``Annotated[str, Field(description=...)]``. Arguments arrive as strings: another JSON type,
an unknown prompt or a missing required argument is ``-32602`` (known fault B42); a
parameter declared ``int`` gets ``"5"`` as ``5`` (lax validation).

What the function returns becomes ``messages``: a ``str`` one user text message; a content
block (``TextContent``, ``ImageContent``, ``AudioContent``, ``EmbeddedResource``,
``ResourceLink``) one user message holding it; a ``PromptMessage`` (or a
``{"role", "content"}`` dict) as it is; a list of any of these in order; a
``GetPromptResult`` as it is (its ``description`` kept, else the prompt's).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from fastapi import params
from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from .._auth.scopes import normalize_scopes
from ..contracts import ErrorContract, meta_with_contracts
from ..errors import InvalidParamsError
from .cache_hints import CacheHints
from .feature_handler import FeatureHandler, build_handler

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["PromptDef", "PromptRegistry", "build_prompt", "shape_messages"]

_NAME: Final = re.compile(r"^[A-Za-z0-9_.\-/]{1,128}\Z")


@functools.cache
def _message_adapter() -> TypeAdapter[types.PromptMessage]:
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return TypeAdapter(types.PromptMessage)


@dataclass(frozen=True, slots=True)
class PromptDef:
    """One registered prompt: ``call`` (function and dependency graphs), ``listing`` (the
    ``Prompt`` object), ``description`` (``GetPromptResult.description``), ``completers``
    (argument → completer, ``completion/complete`` ``ref/prompt``) and ``scopes`` (the OAuth
    scopes a caller needs, ``prompt(scopes=[...])``)."""

    name: str
    call: FeatureHandler
    listing: dict[str, Any]
    description: str | None
    completers: dict[str, FeatureHandler] = field(default_factory=lambda: {})
    scopes: frozenset[str] = frozenset()


def build_prompt(
    func: Callable[..., Any],
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    icons: list[dict[str, Any]] | None,
    meta: dict[str, Any] | None,
    dependencies: Sequence[params.Depends],
    path: str,
    errors: Sequence[ErrorContract] | None = None,
    scopes: Iterable[str] | None = None,
) -> PromptDef:
    """Turn ``func`` into a :class:`PromptDef`.

    Raises:
        ValueError: a name outside ``^[A-Za-z0-9_.\\-/]{1,128}$``, ``*args`` / ``**kwargs``, an
            invalid scope (``_auth.scopes.normalize_scopes``; TypeError for a str); invalid ``errors=``
            (``_handlers.feature_handler.build_handler``) or ``meta`` setting the contracts' key.
    """
    required_scopes = normalize_scopes(scopes)
    prompt_name = name or func.__name__
    if not _NAME.fullmatch(prompt_name):
        raise ValueError(f"invalid prompt name {prompt_name!r}: use 1-128 characters of [A-Za-z0-9_.-/]")
    call = build_handler(func, kind="prompt", name=prompt_name, dependencies=dependencies, path=path, errors=errors)
    properties: dict[str, Any] = call.arguments_model.model_json_schema().get("properties", {})
    arguments: list[dict[str, Any]] = []
    for argument in call.inputs:
        entry: dict[str, Any] = {"name": argument}
        schema: Mapping[str, Any] = properties.get(argument, {})
        if isinstance(schema.get("description"), str):
            entry["description"] = schema["description"]
        entry["required"] = argument in call.required
        arguments.append(entry)
    doc = description if description is not None else inspect.getdoc(func)
    listing: dict[str, Any] = {"name": prompt_name}
    if title is not None:
        listing["title"] = title
    if doc:
        listing["description"] = doc
    if arguments:
        listing["arguments"] = arguments
    if icons:
        listing["icons"] = icons
    meta = meta_with_contracts(meta, call.contracts)  # errors=: listed in _meta
    if meta:
        listing["_meta"] = meta
    return PromptDef(name=prompt_name, call=call, listing=listing, description=doc or None, scopes=required_scopes)


def check_arguments(prompt: PromptDef, arguments: Any) -> dict[str, str]:
    """``prompts/get`` ``arguments`` as ``{name: str}``.

    Raises:
        InvalidParamsError: not an object, a value that is not a string, a required argument
            missing (B42).
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidParamsError("prompts/get 'arguments' must be an object of strings")
    given: dict[str, Any] = arguments  # pyright: ignore[reportUnknownVariableType]
    wrong = [k for k, v in given.items() if not isinstance(v, str)]
    if wrong:
        wrong.sort()
        raise InvalidParamsError(f"Prompt arguments are strings: {', '.join(wrong[:10])} of {prompt.name!r} is not", reason="invalid_arguments")
    missing = [n for n in prompt.call.required if n not in given]
    if missing:
        raise InvalidParamsError(
            f"Missing required argument(s) of prompt {prompt.name!r}: {', '.join(missing)}", reason="invalid_arguments", data={"missing": missing}
        )
    return given


class PromptRegistry:
    """Registered prompts in registration order."""

    def __init__(self) -> None:
        self._prompts: dict[str, PromptDef] = {}
        self.cache = CacheHints()

    def add(self, prompt: PromptDef) -> None:
        """Register ``prompt``; ValueError when the name is taken."""
        if prompt.name in self._prompts:
            raise ValueError(f"a prompt named {prompt.name!r} is already registered")
        self._prompts[prompt.name] = prompt

    def get(self, name: str) -> PromptDef | None:
        """The prompt called ``name``, or None."""
        return self._prompts.get(name)

    def listings(self, allowed: Callable[[frozenset[str]], bool] | None = None) -> list[dict[str, Any]]:
        """Every prompt's ``Prompt`` object (those whose scopes pass ``allowed``)."""
        return [p.listing for p in self._prompts.values() if allowed is None or allowed(p.scopes)]

    def scopes(self) -> set[str]:
        """Every scope some prompt needs."""
        return {scope for p in self._prompts.values() for scope in p.scopes}

    def __len__(self) -> int:
        return len(self._prompts)


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def _message(value: Any, prompt: str) -> dict[str, Any]:
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    if isinstance(value, str):
        return {"role": "user", "content": {"type": "text", "text": value}}
    if isinstance(value, (types.TextContent, types.ImageContent, types.AudioContent, types.EmbeddedResource, types.ResourceLink)):
        return {"role": "user", "content": _dump(value)}
    if isinstance(value, types.PromptMessage):
        return _dump(value)
    if isinstance(value, Mapping):
        try:
            return _dump(_message_adapter().validate_python(value))
        except PydanticValidationError as exc:
            raise TypeError(f"prompt {prompt!r} returned a message that is not a PromptMessage: {exc.error_count()} problem(s)") from exc
    raise TypeError(f"prompt {prompt!r} returned {type(value).__name__}: return str, content blocks or PromptMessage objects")


def shape_messages(value: Any, prompt: PromptDef) -> dict[str, Any]:
    """The ``GetPromptResult`` dict of what ``prompt``'s function returned (module docstring).

    Raises:
        TypeError: a value of another kind (the server's bug: ``-32603``, logged).
    """
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    if type(value) is not str and isinstance(value, types.GetPromptResult):  # a str skips the model class's ABCMeta check
        result = value.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"result_type"})
        if "description" not in result and prompt.description:
            result["description"] = prompt.description
        return result
    items: list[Any] = list(value) if isinstance(value, (list, tuple)) else [value]  # pyright: ignore[reportUnknownArgumentType]
    result: dict[str, Any] = {"messages": [_message(v, prompt.name) for v in items]}
    if prompt.description:
        result["description"] = prompt.description
    return result
