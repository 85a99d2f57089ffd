"""Result shaping: what a tool returned → a ``CallToolResult`` dict.

- a ``CallToolResult`` is sent as it is;
- a content block (``TextContent``, ``ImageContent``, ``AudioContent``, ``EmbeddedResource``,
  ``ResourceLink``) or a list of them becomes ``content``;
- with an output schema, the value becomes ``structuredContent`` (wrapped as
  ``{"result": value}`` for non-object outputs) plus a text block holding its JSON
  (spec 2025-11-25 ``server/tools`` §Structured Content: SHOULD also serialize it as text);
- without one: ``str`` → one text block, ``None`` → no content, anything else → its JSON text.

Every failure of a call that is a tool result (a :class:`~fastapi_mcp_ctx.errors.ToolError`,
invalid arguments, a crash...) is built by :func:`error_result`, the tool-result half of the
one error envelope (``errors.py``): ``isError: true``, the message as a text block (plus
``Recovery: <hint>``), the envelope ``{code, message, data}`` in ``_meta["fastapi-mcp-ctx/error"]``
on every error result, and as ``structuredContent.error`` too when the tool declares no
``outputSchema``. A tool with an ``outputSchema`` gets no ``structuredContent`` on an error:
the spec's schema types successful results (2025-11-25 ``server/tools`` §Output Schema), but
the TypeScript SDK v1 client (1.32) and the MCP Inspector check any ``structuredContent``
against ``outputSchema``, error results included, and turn a non-conforming one into a
client-side ``-32602``: the model would never read the message. A ``CallToolResult`` the
handler returns itself is sent as it is, errors included. A failure whose ``reason`` the tool
declares (``errors=[ErrorContract(...)]``) gets the contract's hint and code first
(``contracts.ErrorContracts.apply``), so ``ToolError`` and ``ctx.fail`` build one envelope.

:func:`merge_outputs` adds what the call accumulated to a successful result: ``ctx.content``
blocks before ``content``, ``ctx.enrich`` fields into ``structuredContent`` plus a text trailer.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ValidationError
from pydantic_core import (
    PydanticSerializationError,
    PydanticSerializationUnexpectedValue,
    to_json,
    to_jsonable_python,
)

from .._outputs import CallOutputs
from .._wire.jsonrpc import RequestId
from .._wire.number_range import non_finite_paths
from .._wire.safe_text import encode
from ..enrichment import trailer_text
from ..errors import McpError, ToolError
from .tool_def import ToolDef

if TYPE_CHECKING:
    pass

__all__ = ["ERROR_META_KEY", "error_result", "merge_outputs", "plain_output", "shape_result", "text_result"]

logger = logging.getLogger("fastapi_mcp_ctx")

ERROR_META_KEY: Final = "fastapi-mcp-ctx/error"
"""The ``_meta`` key holding the error envelope of every ``isError`` result the framework builds."""
_MODULES: Final = sys.modules
"""Without ``mcp_types`` imported, no value can be one of its models: :func:`shape_result` skips the checks."""
_PLAIN_TYPES: Final = {"int": int, "str": str, "bool": bool}
_PLAIN_INT: Final = 1 << 64
"""A plain ``int`` output is written with ``str()`` below this size: far from the repaired
integers of ``_wire.safe_text`` (more than 4300 digits) and from ``str()``'s own limit."""


@functools.cache
def _block_types() -> tuple[type, ...]:
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return (types.TextContent, types.ImageContent, types.AudioContent, types.EmbeddedResource, types.ResourceLink)


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    """``{"content": [{"type": "text", "text": text}], "isError": is_error}``."""
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def error_result(error: ToolError | McpError, request_id: RequestId, tool: ToolDef) -> dict[str, Any]:
    """The ``isError`` result of a failed call of ``tool``::

        {"content": [{"type": "text", "text": message}, {"type": "text", "text": "Recovery: <hint>"}?],
         "isError": true,
         "_meta": {"fastapi-mcp-ctx/error": <envelope>},
         "structuredContent": {"error": <envelope>}}      # only when the tool has no outputSchema

    where ``<envelope>`` is ``{"code": int, "message": str, "data": {"requestId": request_id, ...}}``.
    """
    if tool.contracts is not None:
        error = tool.contracts.apply(error)
    content: list[dict[str, Any]] = [{"type": "text", "text": error.message}]
    if error.recovery_hint:
        content.append({"type": "text", "text": f"Recovery: {error.recovery_hint}"})
    envelope = error.to_error(request_id)
    result: dict[str, Any] = {"content": content, "isError": True, "_meta": {ERROR_META_KEY: envelope}}
    if "outputSchema" not in tool.listing:
        result["structuredContent"] = {"error": envelope}
    return result


def _is_block_list(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    items: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
    blocks = _block_types()
    return all(isinstance(v, blocks) for v in items)


def _refuse_non_finite(tool: ToolDef, value: Any, encoded: bytes) -> None:
    """Raise the ``invalid_output`` ToolError when ``value`` (JSON-ready, ``encoded`` its JSON
    text with ``NaN``/``Infinity`` tokens) holds an ``inf``/``nan`` float: not JSON (RFC 8259
    §6), and ``null`` in its place would be a silent lie. The walk runs only when the text
    shows such a token."""
    if encoded.find(b"NaN") < 0 and encoded.find(b"Infinity") < 0:  # find, not ``in``: no TypeError made and dropped
        return
    paths = non_finite_paths(value)
    if not paths:
        return  # the tokens were inside strings
    where = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    logger.error("tool %r returned a non-finite number (NaN or Infinity) at %s", tool.name, where)
    raise ToolError(
        f"Tool {tool.name!r} returned a non-finite number (NaN or Infinity is not JSON) at {where}",
        code=-32603,
        reason="invalid_output",
    )


def _shape_model(tool: ToolDef, value: Any) -> dict[str, Any] | None:
    """The result of ``value`` when it is a ``CallToolResult``, a content block or a list of them; else None."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py

    if isinstance(value, types.CallToolResult):
        if value.structured_content is not None:  # its Any-typed field would turn nan into null
            _refuse_non_finite(tool, value.structured_content, to_json(value.structured_content, fallback=str))
        return value.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"result_type"})
    if isinstance(value, _block_types()):
        return {"content": [_dump(value)], "isError": False}
    if _is_block_list(value):
        return {"content": [_dump(v) for v in value], "isError": False}
    return None


def plain_output(adapter: Any, wrap: bool) -> type | None:
    """``int``, ``str`` or ``bool`` when ``adapter`` (a tool's ``TypeAdapter`` of its return
    annotation, ``wrap`` its output wrapped as ``{"result": value}``) is exactly that type, no
    constraint: its strict validation and JSON-mode serialization give a value of exactly that
    type back unchanged, so :func:`shape_result` skips both (and the encoding of the text) for
    such a value (~4k instructions a call). None otherwise (``ToolDef.plain_output``)."""
    found: Any = getattr(adapter, "core_schema", None)
    if not wrap or not isinstance(found, dict):
        return None
    schema: dict[str, Any] = found  # pyright: ignore[reportUnknownVariableType]
    return _PLAIN_TYPES.get(schema["type"]) if len(schema) == 1 and "type" in schema else None


def shape_result(tool: ToolDef, value: Any) -> dict[str, Any]:
    """Shape the handler's return ``value`` into a ``CallToolResult`` dict (wire spelling).

    A value of exactly the tool's :attr:`~.tool_def.ToolDef.plain_output` type (an ``int`` below
    2**64) is shaped directly: the same result as through the adapter, without calling it.

    Raises:
        ToolError: ``-32603`` / ``invalid_output``: the value does not match the tool's own
            ``outputSchema``, or holds ``inf``/``nan`` (not JSON, RFC 8259 §6) anywhere in its
            structured output (the server's bug, logged; never a non-conforming result, never
            ``NaN`` on the wire nor a silent ``null``).
    """
    kind: Any = type(value)  # pyright: ignore[reportUnknownVariableType]  (type(), not __class__: a proxy may claim a class)
    if kind is tool.plain_output and (kind is not int or -_PLAIN_INT < value < _PLAIN_INT):
        # what the adapter gives back for exactly its own plain type (plain_output): the value
        # itself, its JSON text "5", "true" or the string as it is, wrapped as {"result": value}
        text = value if kind is str else ("true" if value else "false") if kind is bool else str(value)
        return {"content": [{"type": "text", "text": text}], "structuredContent": {"result": value}, "isError": False}
    if "mcp_types" in _MODULES:
        shaped = _shape_model(tool, value)
        if shaped is not None:
            return shaped
    adapter = tool.output_adapter
    if adapter is not None:
        try:
            # the adapter's own validator and serializer: TypeAdapter's wrappers cost ~7k instructions a call
            checked = "error" if tool.output_passthrough else True  # see ToolDef.output_passthrough
            validated = adapter.validator.validate_python(value, strict=True)
            structured: Any = adapter.serializer.to_python(validated, mode="json", by_alias=True, warnings=checked)
        except (ValidationError, PydanticSerializationError, PydanticSerializationUnexpectedValue) as exc:
            logger.exception("tool %r returned output that does not match its outputSchema", tool.name)
            raise ToolError(
                f"Tool {tool.name!r} returned output that does not match its outputSchema",
                code=-32603,
                reason="invalid_output",
            ) from exc
        if isinstance(value, str):
            text = value
        else:
            encoded = encode(structured)
            if encoded.find(b"NaN") >= 0 or encoded.find(b"Infinity") >= 0:  # the walk (and its wrapper) only then
                _refuse_non_finite(tool, {"result": structured} if tool.wrap_output else structured, encoded)
            text = encoded.decode()
        if tool.wrap_output:
            structured = {"result": structured}
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}
    if value is None:
        return {"content": [], "isError": False}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": False}
    if isinstance(value, BaseModel):
        structured = _dump(value)
        encoded = encode(structured)
        _refuse_non_finite(tool, structured, encoded)
        return {"content": [{"type": "text", "text": encoded.decode()}], "structuredContent": structured, "isError": False}
    jsonable: Any = to_jsonable_python(value, fallback=str)
    encoded = encode(jsonable)
    _refuse_non_finite(tool, jsonable, encoded)
    result: dict[str, Any] = {"content": [{"type": "text", "text": encoded.decode()}], "isError": False}
    if isinstance(jsonable, dict):
        result["structuredContent"] = jsonable
    return result


def _broken_output(tool: ToolDef, request_id: RequestId, problem: str) -> dict[str, Any]:
    logger.error("tool %r %s", tool.name, problem)
    failure = ToolError(f"Tool {tool.name!r} {problem}", code=-32603, reason="invalid_output")
    return error_result(failure, request_id, tool)


def merge_outputs(tool: ToolDef, result: dict[str, Any], outputs: CallOutputs | None, request_id: RequestId) -> dict[str, Any]:
    """Add what a call accumulated to its ``result`` (a ``CallToolResult`` dict):
    ``ctx.content`` blocks before ``content``; ``ctx.enrich`` fields into a dict
    ``structuredContent`` and as a text block ending ``content``. An error result is returned
    unchanged (failures carry neither).

    Returns:
        ``result`` (changed in place), or the ``invalid_output`` error result (``-32603``, the
        server's bug, logged) when the tool declares a required enrichment field the call never
        set, or returned a key its enrichment also sets.
    """
    if result.get("isError"):
        return result
    spec = tool.enrichment
    if spec is not None:
        values = outputs.enriched if outputs is not None else {}
        missing = spec.missing(values)
        if missing:
            return _broken_output(tool, request_id, f"did not set its required enrichment field(s) {', '.join(missing)}")
        if values:
            structured: Any = result.get("structuredContent")
            if isinstance(structured, dict):
                clash = sorted(values.keys() & structured.keys())  # pyright: ignore[reportUnknownArgumentType]
                if clash:
                    return _broken_output(tool, request_id, f"returned key(s) {', '.join(clash)} that its enrichment also sets")
                result["structuredContent"] = {**structured, **values}
            result.setdefault("content", []).append({"type": "text", "text": trailer_text(values)})
    if outputs is not None and outputs.blocks:
        result["content"] = [*outputs.blocks, *result.get("content", [])]
    return result
