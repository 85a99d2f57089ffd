"""Resources: registration, lookup by URI, and the shape of ``resources/read`` contents.

A resource is a static URI or an RFC 6570 template (``_wire.uri_template``); its function's plain
parameters take the template's variables (strings, or a list for ``{/var*}``; lax validation
turns ``"123"`` into an ``int`` parameter), its ``Depends`` parameters are FastAPI's. Lookup:
the static URI first (exact string), then each template in registration order; the first
whose shape fits wins (a malformed value in it is ``-32602``, not a fall-through). Nothing
fits: :class:`~fastapi_mcp_ctx.errors.ResourceNotFoundError` (``-32602`` + ``data.uri`` in
2026, ``-32002`` in 2025; known fault B42).

What a function returns becomes ``contents`` (spec 2025-11-25 ``server/resources``
§Resource Contents; known fault B41): ``str`` one text item, ``bytes`` one blob item (strict
RFC 4648 base64, one step, no line breaks), a ``TextResourceContents`` / ``BlobResourceContents``
or a list of them as they are, a ``ReadResourceResult`` as it is, ``None`` "not found", anything
else (dict, list, model) its JSON text with ``mimeType`` ``application/json`` unless declared.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from fastapi import params
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from .._auth.scopes import normalize_scopes
from .._wire.safe_text import encode
from .._wire.uri_template import UriTemplate, UriValue
from .._wire.uris import normalize_uri
from ..contracts import ErrorContract, meta_with_contracts
from ..errors import ResourceNotFoundError
from .cache_hints import CacheHints
from .feature_handler import FeatureHandler, build_handler

if TYPE_CHECKING:
    pass

__all__ = ["ResourceDef", "ResourceRegistry", "build_resource", "shape_contents"]

_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


@dataclass(frozen=True, slots=True)
class ResourceDef:
    """One registered resource or template.

    Attributes:
        uri: the static URI or the template text. template: the parsed template (None: static).
        call: the function and its dependency graphs. mime_type: the declared ``mimeType``.
        listing: the ``Resource`` / ``ResourceTemplate`` object as listed.
        cache: the cache hints of its ``resources/read`` results.
        completers: template variable → completer (``completion/complete`` ``ref/resource``).
        scopes: the OAuth scopes a caller needs to read it (``resource(scopes=[...])``).
    """

    uri: str
    template: UriTemplate | None
    call: FeatureHandler
    mime_type: str | None
    listing: dict[str, Any]
    cache: CacheHints = CacheHints()
    completers: dict[str, FeatureHandler] = field(default_factory=lambda: {})
    scopes: frozenset[str] = frozenset()


def build_resource(
    func: Callable[..., Any],
    uri: str,
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    mime_type: str | None,
    size: int | None,
    annotations: Mapping[str, Any] | None,
    icons: list[dict[str, Any]] | None,
    meta: dict[str, Any] | None,
    cache: CacheHints,
    dependencies: Sequence[params.Depends],
    path: str,
    errors: Sequence[ErrorContract] | None = None,
    scopes: Iterable[str] | None = None,
) -> ResourceDef:
    """Turn ``func`` into a :class:`ResourceDef` for ``uri`` (static, or an RFC 6570 template).

    Raises:
        ValueError: ``uri`` without a scheme, an unsupported template, a template variable the
            function does not take, or a required parameter that is no path variable; an
            invalid scope (``_auth.scopes.normalize_scopes``; TypeError for a str); invalid ``errors=``
            (``_handlers.feature_handler.build_handler``) or ``meta`` setting the contracts' key.
    """
    required_scopes = normalize_scopes(scopes)
    if not isinstance(uri, str) or not _SCHEME.match(uri):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"resource URI {uri!r} must start with a scheme (e.g. 'file://', 'test://')")
    parsed = UriTemplate(uri)
    template = None if parsed.is_static else parsed
    resource_name = name or func.__name__
    call = build_handler(func, kind="resource", name=resource_name, dependencies=dependencies, path=path, errors=errors)
    variables = set(parsed.variables)
    missing = variables - set(call.inputs)
    if missing:
        raise ValueError(f"resource {uri!r}: the function takes no parameter for {sorted(missing)}")
    path_variables = variables - set(parsed.query_variables)
    unfilled = [n for n in call.required if n not in path_variables]
    if unfilled:
        raise ValueError(f"resource {uri!r}: parameters {unfilled} need a default (only path variables are always given)")
    listing: dict[str, Any] = {("uriTemplate" if template else "uri"): uri, "name": resource_name}
    if title is not None:
        listing["title"] = title
    doc = description if description is not None else (func.__doc__ and func.__doc__.strip().split("\n\n")[0].strip())
    if doc:
        listing["description"] = doc
    if mime_type is not None:
        listing["mimeType"] = mime_type
    if size is not None and template is None:
        listing["size"] = size
    if annotations:
        listing["annotations"] = dict(annotations)
    if icons:
        listing["icons"] = icons
    meta = meta_with_contracts(meta, call.contracts)  # errors=: listed in _meta
    if meta:
        listing["_meta"] = meta
    return ResourceDef(uri=uri, template=template, call=call, mime_type=mime_type, listing=listing, cache=cache, scopes=required_scopes)


class ResourceRegistry:
    """Static resources by URI and templates in registration order."""

    def __init__(self) -> None:
        self._static: dict[str, ResourceDef] = {}
        self._templates: dict[str, ResourceDef] = {}

    def add(self, resource: ResourceDef) -> None:
        """Register ``resource``; ValueError when its URI or template is taken."""
        table = self._static if resource.template is None else self._templates
        key = normalize_uri(resource.uri) if resource.template is None else resource.uri
        if key in table:
            raise ValueError(f"a resource {resource.uri!r} is already registered")
        table[key] = resource

    def template(self, template: str) -> ResourceDef | None:
        """The template registered as ``template`` (exact text), or None."""
        return self._templates.get(template)

    def find(self, uri: str, era: str) -> tuple[ResourceDef, dict[str, UriValue]]:
        """The resource serving ``uri`` and its decoded variables: the static resource whose URI
        has ``uri``'s normal form (``_wire.uris.normalize_uri``, RFC 3986 §6.2.2), else the first
        template matching ``uri``.

        Raises:
            ResourceNotFoundError: nothing serves it. UriMatchError: a template fits but a
                value is malformed (``-32602``).
        """
        static = self._static.get(normalize_uri(uri))  # docs://%70ayroll is docs://payroll, its scopes included
        if static is not None:
            return static, {}
        for resource in self._templates.values():
            assert resource.template is not None
            values = resource.template.match(uri)
            if values is not None:
                return resource, values
        raise ResourceNotFoundError(uri, era=era)

    def listings(self, allowed: Callable[[frozenset[str]], bool] | None = None) -> list[dict[str, Any]]:
        """The static resources' ``Resource`` objects (those whose scopes pass ``allowed``)."""
        return [r.listing for r in self._static.values() if allowed is None or allowed(r.scopes)]

    def template_listings(self, allowed: Callable[[frozenset[str]], bool] | None = None) -> list[dict[str, Any]]:
        """The templates' ``ResourceTemplate`` objects (those whose scopes pass ``allowed``)."""
        return [r.listing for r in self._templates.values() if allowed is None or allowed(r.scopes)]

    def scopes(self) -> set[str]:
        """Every scope some resource or template needs."""
        return {scope for table in (self._static, self._templates) for r in table.values() for scope in r.scopes}

    def __len__(self) -> int:
        return len(self._static) + len(self._templates)


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def _item(value: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    if isinstance(value, (types.TextResourceContents, types.BlobResourceContents)):
        return _dump(value)
    item: dict[str, Any] = {"uri": uri}
    if isinstance(value, (bytes, bytearray, memoryview)):
        if mime_type is not None:
            item["mimeType"] = mime_type
        item["blob"] = base64.b64encode(bytes(value)).decode("ascii")  # pyright: ignore[reportUnknownArgumentType]
        return item
    if isinstance(value, str):
        text = value
    else:
        text = encode(to_jsonable_python(value, fallback=str)).decode()  # readable JSON text (_wire.safe_text)
        mime_type = mime_type or "application/json"
    if mime_type is not None:
        item["mimeType"] = mime_type
    item["text"] = text
    return item


def shape_contents(value: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    """The ``ReadResourceResult`` dict of what a resource function returned for ``uri`` (rules
    in the module docstring; ``None`` is the caller's "not found").

    Raises:
        TypeError: another protocol result (an ``InputRequiredResult``, a ``CallToolResult``...):
            the server's bug, answered ``-32603`` and logged, never sent as text (known fault B46).
    """
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    if isinstance(value, types.ReadResourceResult):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"result_type"})
    if isinstance(value, types.Result):  # e.g. an InputRequiredResult: never JSON-dumped as content (B46)
        raise TypeError(f"resource {uri!r} returned a {type(value).__name__}: return contents or a ReadResourceResult")
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (types.TextResourceContents, types.BlobResourceContents)) for v in value):  # pyright: ignore[reportUnknownVariableType]
        items: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        return {"contents": [_dump(v) for v in items]}
    return {"contents": [_item(value, uri, mime_type)]}
