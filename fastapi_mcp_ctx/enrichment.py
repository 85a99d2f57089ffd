"""Result enrichment: agent-facing notices, totals and query echoes a tool declares.

    class SearchEnrichment(TypedDict, total=False):
        totalCount: int
        effectiveQuery: str
        notice: str

    @mcp_router.tool(enrichment=SearchEnrichment)
    async def search(q: str, ctx: Context = Depends(mcp_context)) -> Hits:
        hits = find(q)
        ctx.enrich.total(len(hits))           # totalCount
        ctx.enrich.echo(q.strip())            # effectiveQuery
        if not hits:
            ctx.enrich.notice("Nothing matched; try a shorter query.")
        return Hits(items=hits[:10])

The declaration (a ``TypedDict`` class, a pydantic model class, or a mapping of field name →
type, whose fields are all optional) extends the tool's ``outputSchema``: its properties
beside the output's own (a name both use is refused at registration; a ``dict`` output that
returns a key of that name is an ``invalid_output`` result), its required keys required. Values set during the call are checked against their declared type at once (strict
validation) and merged into ``structuredContent`` after the handler returns, plus one text
block ``name: value`` per line at the end of ``content``. A required field left unset makes
the result an ``isError`` (``-32603``, ``invalid_output``: the server's bug). Error results
carry no enrichment.

A tool that declares no enrichment gets a no-op ``ctx.enrich`` (service code can call it from
any tool); with a declaration, an undeclared field or a wrongly typed value is a
:class:`~fastapi_mcp_ctx.errors.DeclarationError`. The kind helpers write fixed fields:
``notice`` (last call wins), ``totalCount``, ``effectiveQuery``.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import typing_extensions
from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_json

from ._outputs import CallOutputs
from .errors import DeclarationError

__all__ = ["ECHO_FIELD", "NOTICE_FIELD", "TOTAL_FIELD", "Enrich", "EnrichmentSpec", "build_enrichment", "extend_output_schema"]

NOTICE_FIELD: Final = "notice"
TOTAL_FIELD: Final = "totalCount"
ECHO_FIELD: Final = "effectiveQuery"
MAX_TRAILER_VALUE_CHARS: Final = 500
"""Characters of one field's value in the text trailer (``structuredContent`` keeps all of it)."""
_QUALIFIERS: Final = frozenset(
    {typing.Required, typing.NotRequired, typing_extensions.Required, typing_extensions.NotRequired, typing_extensions.ReadOnly}
)
_FIELD_NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}\Z")


@dataclass(frozen=True, slots=True)
class EnrichmentSpec:
    """A tool's declared enrichment (built once at registration).

    Attributes:
        owner: names the tool in messages (``"tool 'search'"``).
        adapters: field name → strict validator/serializer of its declared type.
        required: fields every successful result must carry.
        schema: ``{"properties": {...}, "required": [...], "$defs"?: {...}}`` of the fields.
    """

    owner: str
    adapters: Mapping[str, TypeAdapter[Any]]
    required: frozenset[str]
    schema: Mapping[str, Any]

    def value_of(self, name: str, value: Any) -> Any:
        """``value`` checked against field ``name`` and made JSON-ready.

        Raises:
            DeclarationError: ``name`` is not declared, or ``value`` is not of its type.
        """
        adapter = self.adapters.get(name)
        if adapter is None:
            declared = ", ".join(repr(n) for n in self.adapters)
            raise DeclarationError(f"ctx.enrich: {self.owner} declares no enrichment field {name!r}; declared: {declared}")
        try:
            checked = adapter.validate_python(value, strict=True)
            return adapter.dump_python(checked, mode="json", by_alias=True)
        except PydanticValidationError as exc:
            problems = "; ".join(e["msg"] for e in exc.errors(include_url=False, include_input=False))
            raise DeclarationError(f"ctx.enrich: {self.owner} field {name!r} got {type(value).__name__}: {problems}") from exc

    def missing(self, values: Mapping[str, Any]) -> list[str]:
        """Required fields absent from ``values``."""
        return sorted(self.required.difference(values))


def _unqualified(hint: Any) -> Any:
    """A TypedDict item's type without ``Required`` / ``NotRequired`` / ``ReadOnly`` (the keys
    already say which are required)."""
    while typing.get_origin(hint) in _QUALIFIERS:
        hint = typing.get_args(hint)[0]
    return hint


def _fields_of(declaration: Any, owner: str) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """``(name → annotation, name → model field definition, required names)`` of a TypedDict,
    a model class or a mapping."""
    if typing_extensions.is_typeddict(declaration):
        hints = {name: _unqualified(hint) for name, hint in typing.get_type_hints(declaration, include_extras=True).items()}
        required_keys: frozenset[str] = getattr(declaration, "__required_keys__", frozenset())
        definitions = {name: (hint, ... if name in required_keys else None) for name, hint in hints.items()}
        return dict(hints), definitions, set(required_keys)
    if inspect.isclass(declaration) and issubclass(declaration, BaseModel):
        annotations: dict[str, Any] = {}
        model_fields: dict[str, Any] = {}
        required: set[str] = set()
        for name, info in declaration.model_fields.items():
            key = info.alias or name
            annotations[key] = typing.Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
            model_fields[key] = (info.annotation, info)
            if info.is_required():
                required.add(key)
        return annotations, model_fields, required
    if isinstance(declaration, Mapping):
        items: Mapping[Any, Any] = declaration  # pyright: ignore[reportUnknownVariableType]
        if not all(isinstance(key, str) for key in items):
            raise ValueError(f"{owner}: enrichment field names must be strings")
        plain = {str(key): value for key, value in items.items()}
        return plain, {name: (hint, None) for name, hint in plain.items()}, set()
    raise ValueError(f"{owner}: enrichment= takes a TypedDict class, a pydantic model class or a mapping of field name to type")


def build_enrichment(declaration: Any, owner: str) -> EnrichmentSpec | None:
    """The :class:`EnrichmentSpec` of ``enrichment=`` (None when nothing is declared).

    Raises:
        ValueError: not a TypedDict / model class / mapping, a field name outside
            ``^[A-Za-z][A-Za-z0-9_]{0,63}$``, or a type pydantic cannot validate.
    """
    if declaration is None:
        return None
    fields, definitions, required = _fields_of(declaration, owner)
    if not fields:
        return None
    for name in fields:
        if not _FIELD_NAME.fullmatch(name):
            raise ValueError(f"{owner}: enrichment field name {name!r} must match ^[A-Za-z][A-Za-z0-9_]{{0,63}}$")
    try:
        adapters = {name: TypeAdapter(annotation) for name, annotation in fields.items()}
        model = create_model(  # pyright: ignore[reportCallIssue, reportUnknownVariableType]
            f"{owner.split()[-1].strip(chr(39))}_enrichment",
            __config__=ConfigDict(arbitrary_types_allowed=False),
            **definitions,  # pyright: ignore[reportArgumentType]
        )
        raw = model.model_json_schema(mode="serialization")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    except Exception as exc:  # pydantic's schema errors: a registration problem, said at registration
        raise ValueError(f"{owner}: enrichment types must be JSON-serializable pydantic types: {exc}") from exc
    properties: dict[str, Any] = dict(raw.get("properties", {}))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
    for name in fields:
        if name not in required and isinstance(properties.get(name), dict):
            prop: dict[str, Any] = properties[name]
            prop.pop("default", None)  # an unset optional field is absent, never null
    schema: dict[str, Any] = {"properties": properties, "required": sorted(required)}
    defs = raw.get("$defs")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if defs:
        schema["$defs"] = defs
    return EnrichmentSpec(owner=owner, adapters=adapters, required=frozenset(required), schema=schema)


def extend_output_schema(output_schema: dict[str, Any] | None, spec: EnrichmentSpec) -> dict[str, Any]:
    """The tool's ``outputSchema`` with the enrichment fields beside its own properties.

    Raises:
        ValueError: the tool has no object ``outputSchema`` with ``properties`` (annotate its
            return type), a field name the output already uses, or a ``$defs`` name both use
            for different schemas.
    """
    if output_schema is not None and output_schema.get("type") == "object" and "properties" not in output_schema:
        output_schema = {**output_schema, "properties": {}}  # a mapping output: the fields beside its keys
    if output_schema is None or not isinstance(output_schema.get("properties"), dict):
        raise ValueError(
            f"{spec.owner}: enrichment= needs an outputSchema with properties to extend: annotate the "
            "return type (a model, a TypedDict or any type, which is wrapped as {'result': ...})"
        )
    extended = dict(output_schema)
    properties: dict[str, Any] = dict(output_schema["properties"])
    for name, prop in spec.schema["properties"].items():
        if name in properties:
            raise ValueError(f"{spec.owner}: enrichment field {name!r} collides with the output's own field of that name")
        properties[name] = prop
    extended["properties"] = properties
    required = [*output_schema.get("required", []), *spec.schema["required"]]
    if required:
        extended["required"] = required
    if "$defs" in spec.schema:
        defs: dict[str, Any] = dict(output_schema.get("$defs", {}))
        for name, definition in spec.schema["$defs"].items():
            if name in defs and defs[name] != definition:
                raise ValueError(f"{spec.owner}: enrichment type {name!r} differs from the output's type of that name")
            defs[name] = definition
        extended["$defs"] = defs
    return extended


def trailer_text(values: Mapping[str, Any]) -> str:
    """The short text form of the enrichment: ``name: value`` lines (strings as they are,
    anything else as JSON), each value cut to :data:`MAX_TRAILER_VALUE_CHARS`."""
    lines: list[str] = []
    for name, value in values.items():
        text = value if isinstance(value, str) else to_json(value).decode()
        if len(text) > MAX_TRAILER_VALUE_CHARS:
            text = text[: MAX_TRAILER_VALUE_CHARS - 1] + "…"
        lines.append(f"{name}: {text}")
    return "\n".join(lines)


class EnrichedCall(Protocol):
    """What :class:`Enrich` reads and fills of one call (its ``CallState``, in ``_context/call_state.py``):
    the tool's declaration and the outputs accumulated beside its return value. A Protocol, so this
    module, which ``CallState`` imports, imports nothing of the call back."""

    enrichment: EnrichmentSpec | None
    outputs: CallOutputs | None


class Enrich:
    """``ctx.enrich``: set the call's declared enrichment fields (module docstring).

    ``ctx.enrich(totalCount=3)``, ``ctx.enrich({"totalCount": 3})`` (a ``TypedDict`` instance
    type-checks the fields statically), ``ctx.enrich.notice(text)``, ``.total(n)``,
    ``.echo(query)``. A later value of a field replaces the earlier one.
    """

    __slots__ = ("_call",)

    def __init__(self, call: EnrichedCall) -> None:
        self._call = call

    def __call__(self, values: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Set declared fields from ``values`` and ``fields`` (a no-op when the tool declares none).

        Raises:
            DeclarationError: an undeclared field, or a value outside its declared type (nothing
                of this call is set then).
        """
        spec = self._call.enrichment
        if spec is None:
            return
        merged: dict[str, Any] = {**(values or {}), **fields}
        checked = {name: spec.value_of(name, value) for name, value in merged.items()}
        outputs = self._call.outputs
        if outputs is None:
            outputs = self._call.outputs = CallOutputs()
        outputs.enriched.update(checked)

    def notice(self, text: str) -> None:
        """Set ``notice``: guidance for the model (an empty result, a caveat). Last call wins."""
        self(**{NOTICE_FIELD: text})

    def total(self, count: int) -> None:
        """Set ``totalCount``: how many items matched before any truncation."""
        self(**{TOTAL_FIELD: count})

    def echo(self, query: str) -> None:
        """Set ``effectiveQuery``: the query as the server understood it."""
        self(**{ECHO_FIELD: query})

    @property
    def declared(self) -> tuple[str, ...]:
        """The fields this tool declares (empty: ``ctx.enrich`` is a no-op)."""
        spec = self._call.enrichment
        return tuple(spec.adapters) if spec is not None else ()

    def __repr__(self) -> str:
        return f"Enrich(declared={self.declared!r})"
