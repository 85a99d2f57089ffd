"""One argument's field: its annotation, default, whether it is required, and its JSON Schema's
type (the shape two declarers of one name must share), built at registration for
``_handlers.arguments``; and how a model judges a call's raw arguments (strict JSON for a tool,
lax for template variables and prompt arguments)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, get_origin

from pydantic import BaseModel, ConfigDict, PydanticUserError, create_model
from pydantic.fields import FieldInfo

from .._fastapi_compat import base_type

__all__ = [
    "ArgumentField",
    "DeferredModel",
    "Validate",
    "argument_fields",
    "argument_model",
    "lax_python",
    "strict_json",
    "type_label",
    "validates_alike",
]

_CONFIG: Final = ConfigDict(extra="ignore", arbitrary_types_allowed=True)
_ANNOTATION_KEYWORDS: Final = frozenset({"title", "description", "default", "examples", "deprecated"})
_NULL: Final = {"type": "null"}
Validate = Callable[[type[BaseModel], Any], Any]


def strict_json(model: type[BaseModel], raw: Any) -> Any:
    """A tool's arguments: JSON bytes judged by JSON Schema's rules (``"5"`` is no integer)."""
    return model.__pydantic_validator__.validate_json(raw, strict=True)


# Core-schema nodes (and their keys) whose strict validation of a value parsed from JSON gives what
# strict JSON validation of its text gives, errors included (tests/test_plain_arguments.py compares
# both on every JSON kind): int, str and bool and their constraints, defaults and ``| None``. Not
# float: an integer beyond a double's range is ``inf`` from JSON text but refused from Python.
_ALIKE_NODES: Final = {
    "int": frozenset({"type", "ge", "gt", "le", "lt", "multiple_of", "strict", "ref", "metadata"}),
    "str": frozenset({"type", "min_length", "max_length", "pattern", "strict", "ref", "metadata"}),
    "bool": frozenset({"type", "strict", "ref", "metadata"}),
}
_ALIKE_FIELD_KEYS: Final = frozenset({"type", "schema", "metadata", "serialization_alias"})


def _alike(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "default":
        return node.keys() <= {"type", "schema", "default", "metadata"} and _alike(node["schema"])
    if kind == "nullable":
        return node.keys() <= {"type", "schema", "strict", "metadata"} and _alike(node["schema"])
    allowed = _ALIKE_NODES.get(kind) if isinstance(kind, str) else None
    return allowed is not None and node.keys() <= allowed and node.get("strict", True) is True


def validates_alike(model: type[BaseModel]) -> bool:
    """True when ``validate_python(from_json(text), strict=True)`` of ``model`` gives exactly what
    :func:`strict_json` gives for ``text``, a JSON object: a model with the project's config whose
    fields (no alias to look up, no validator of their own) are ``int``, ``str`` or ``bool``, with
    their constraints, defaults or ``| None``. Such a tool validates the parsed ``arguments``
    directly: no encoding of them for the JSON validator (~4k instructions a call)."""
    schema: Any = model.__pydantic_core_schema__
    if schema.get("type") != "model" or schema.get("custom_init") or schema.get("root_model") or schema.get("post_init"):
        return False
    if schema.get("config", {}).keys() - {"extra_fields_behavior", "title"}:
        return False
    fields_schema: Any = schema.get("schema", {})
    if fields_schema.get("type") != "model-fields" or fields_schema.get("computed_fields") or fields_schema.keys() - {"type", "fields", "model_name", "computed_fields"}:
        return False
    fields: dict[str, Any] = fields_schema.get("fields", {})
    return all(field.get("type") == "model-field" and field.keys() <= _ALIKE_FIELD_KEYS and _alike(field["schema"]) for field in fields.values())


def lax_python(model: type[BaseModel], raw: Any) -> Any:
    """Template variables, prompt arguments, completion inputs: strings converted (``"42"`` → 42)."""
    return model.__pydantic_validator__.validate_python(raw if isinstance(raw, dict) else dict(raw))


def type_label(annotation: Any) -> str:
    """A readable name of a type for messages (``int``, ``Session``, ``list[int]``)."""
    base = base_type(annotation)
    if inspect.isclass(base) and get_origin(base) is None:
        return base.__name__
    return repr(base).replace("typing.", "")


@dataclass(frozen=True, slots=True)
class ArgumentField:
    """One parameter that is an argument: ``name`` the argument's (its alias, else the
    parameter's), ``param`` the parameter's, ``default`` ``...`` when required, a value, or a
    ``FieldInfo`` (``Body()``, ``Field()``); ``shape`` its JSON Schema's type as canonical JSON."""

    name: str
    param: str
    annotation: Any
    default: Any
    required: bool
    shape: str


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        mapping: dict[str, Any] = node  # pyright: ignore[reportUnknownVariableType]
        ref = mapping.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in mapping.values():
            _refs(value, found)
    elif isinstance(node, list):
        items: list[Any] = node  # pyright: ignore[reportUnknownVariableType]
        for item in items:
            _refs(item, found)


def _shape(schema: dict[str, Any], name: str) -> str:
    """The type part of property ``name``'s schema (and the ``$defs`` it reaches) as canonical
    JSON: annotation keywords and a ``null`` branch left out."""
    properties: dict[str, Any] = schema.get("properties", {})
    prop: dict[str, Any] = {k: v for k, v in properties.get(name, {}).items() if k not in _ANNOTATION_KEYWORDS}
    branches: Any = prop.get("anyOf")
    if isinstance(branches, list) and _NULL in branches:
        rest: list[Any] = [b for b in branches if b != _NULL]  # pyright: ignore[reportUnknownVariableType]
        prop = rest[0] if len(rest) == 1 else {**prop, "anyOf": rest}
    defs: dict[str, Any] = schema.get("$defs", {})
    reached: set[str] = set()
    pending: set[str] = set()
    _refs(prop, pending)
    while pending:
        ref = pending.pop()
        if ref not in reached:
            reached.add(ref)
            _refs(defs.get(ref), pending)
    return json.dumps({"type": prop, "defs": {k: defs.get(k) for k in sorted(reached)}}, sort_keys=True, default=str)


def _refused(parameter: inspect.Parameter, annotation: Any, where: str) -> ValueError:
    label = type_label(annotation)
    return ValueError(
        f"{where}: parameter {parameter.name!r} of type {label} is neither an argument with a JSON Schema nor a"
        f" dependency. If FastAPI should provide it, declare `{parameter.name}: {label} = Depends(...)` or"
        f" `{parameter.name}: Annotated[{label}, Depends(...)]`; if the client sends it, give it a pydantic type"
        " (str, int, a BaseModel, a TypedDict...)"
    )


def _spec(parameter: inspect.Parameter) -> tuple[Any, Any]:
    annotation = Any if parameter.annotation is inspect.Parameter.empty else parameter.annotation
    return annotation, (... if parameter.default is inspect.Parameter.empty else parameter.default)


def argument_fields(parameters: Sequence[inspect.Parameter], where: str, model_name: str) -> tuple[tuple[ArgumentField, ...], type[BaseModel] | None]:
    """The :class:`ArgumentField` of each of ``parameters`` (annotations resolved) and the one
    model validating them (None without parameters).

    Raises:
        ValueError: a type without a JSON Schema (``Session``, ``io.BytesIO``, ``Callable``...): the
            message names ``where``, the parameter, its type and the fixes (issue 22); a name
            pydantic reserves (``model_config``, a leading underscore).
    """
    if not parameters:
        return (), None
    for parameter in parameters:
        if parameter.name == "model_config" or parameter.name.startswith("_"):
            raise ValueError(
                f"{where}: the argument {parameter.name!r} has a name pydantic reserves (model_config, or a leading "
                f"underscore: a private attribute, never a field): rename the parameter, and keep the argument's "
                f"name on the wire with Annotated[..., Field(alias={parameter.name.lstrip('_') or 'value'!r})]"
            )
    specs = {p.name: _spec(p) for p in parameters}
    try:
        model = create_model(model_name, __config__=_CONFIG, **specs)  # pyright: ignore[reportCallIssue, reportUnknownVariableType, reportArgumentType]
        schema = model.model_json_schema()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    except (PydanticUserError, TypeError):
        for parameter in parameters:  # which one: each alone (the error path only)
            try:
                create_model("argument", __config__=_CONFIG, **{parameter.name: specs[parameter.name]}).model_json_schema()  # pyright: ignore[reportCallIssue, reportUnknownMemberType, reportArgumentType]
            except (PydanticUserError, TypeError) as single:
                raise _refused(parameter, specs[parameter.name][0], where) from single
        raise
    fields: list[ArgumentField] = []
    for parameter in parameters:
        info: FieldInfo = model.model_fields[parameter.name]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        alias: Any = info.alias  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        name = alias if isinstance(alias, str) else parameter.name
        annotation, default = specs[parameter.name]
        fields.append(ArgumentField(name, parameter.name, annotation, default, bool(info.is_required()), _shape(schema, name)))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
    return tuple(fields), model  # pyright: ignore[reportUnknownVariableType]


def argument_model(name: str, fields: Sequence[ArgumentField]) -> type[BaseModel]:
    """The pydantic model validating ``fields`` (by their parameter names, aliases kept)."""
    spec: dict[str, Any] = {f.param: (f.annotation, f.default) for f in fields}
    return create_model(name, __config__=_CONFIG, **spec)  # pyright: ignore[reportCallIssue, reportUnknownVariableType, reportArgumentType]


class DeferredModel:
    """A flattened argument model that can be dropped once registration has used it and is built
    again, from the same fields, when next needed.

    Registration builds the model (a signature pydantic refuses fails there) and takes its JSON
    Schema; a tool then drops it (:meth:`drop`), so a tool that is never called holds no model
    (about 12 kB of RSS each: the class, its core schema, validator and serializer) and its first
    call builds it again (``create_model`` with the same name, fields, defaults and config).
    """

    __slots__ = ("_model", "fields", "name")

    def __init__(self, name: str, fields: Sequence[ArgumentField], model: type[BaseModel] | None = None) -> None:
        self.name = name
        self.fields = tuple(fields)
        self._model = model

    def get(self) -> type[BaseModel]:
        """The model: the one given or built before, else built now."""
        model = self._model
        if model is None:
            model = self._model = argument_model(self.name, self.fields)
        return model

    def drop(self) -> None:
        """Forget the model (the next :meth:`get` builds it again)."""
        self._model = None
