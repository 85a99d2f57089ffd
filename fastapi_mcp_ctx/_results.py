"""Result shaping: what a tool returned → a ``CallToolResult`` dict.

- a ``CallToolResult`` is sent as it is;
- a content block (``TextContent``, ``ImageContent``, ``AudioContent``, ``EmbeddedResource``,
  ``ResourceLink``) or a list of them becomes ``content``;
- with an output schema, the value becomes ``structuredContent`` (wrapped as
  ``{"result": value}`` for non-object outputs) plus a text block holding its JSON
  (spec 2025-11-25 ``server/tools`` §Structured Content: SHOULD also serialize it as text);
- without one: ``str`` → one text block, ``None`` → no content, anything else → its JSON text.

A :class:`~fastapi_mcp_ctx.errors.ToolError` becomes ``isError: true`` with its message
(and ``recovery_hint``); with an output schema no ``structuredContent`` is required on an
error result (2025-11-25 §Output Schema applies to successful results only).
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ValidationError
from pydantic_core import (
    PydanticSerializationError,
    PydanticSerializationUnexpectedValue,
    to_json,
    to_jsonable_python,
)

from ._registry import ToolDef
from .errors import ToolError

__all__ = ["error_result", "shape_result", "text_result"]

logger = logging.getLogger("fastapi_mcp_ctx")

_BLOCK_TYPES = (types.TextContent, types.ImageContent, types.AudioContent, types.EmbeddedResource, types.ResourceLink)


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    """``{"content": [{"type": "text", "text": text}], "isError": is_error}``."""
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def error_result(exc: ToolError) -> dict[str, Any]:
    """The ``isError`` result of an anticipated tool failure."""
    content: list[dict[str, Any]] = [{"type": "text", "text": exc.message}]
    if exc.recovery_hint:
        content.append({"type": "text", "text": f"Recovery: {exc.recovery_hint}"})
    return {"content": content, "isError": True}


def _is_block_list(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    items: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
    return all(isinstance(v, _BLOCK_TYPES) for v in items)


def shape_result(tool: ToolDef, value: Any) -> dict[str, Any]:
    """Shape the handler's return ``value`` into a ``CallToolResult`` dict (wire spelling)."""
    if isinstance(value, types.CallToolResult):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"result_type"})
    if isinstance(value, _BLOCK_TYPES):
        return {"content": [_dump(value)], "isError": False}
    if _is_block_list(value):
        return {"content": [_dump(v) for v in value], "isError": False}
    adapter = tool.output_adapter
    if adapter is not None:
        try:
            # the adapter's own validator and serializer: TypeAdapter's wrappers cost ~7k instructions a call
            checked = "error" if tool.output_passthrough else True  # see ToolDef.output_passthrough
            validated = adapter.validator.validate_python(value, strict=True)
            structured: Any = adapter.serializer.to_python(validated, mode="json", by_alias=True, warnings=checked)
        except (ValidationError, PydanticSerializationError, PydanticSerializationUnexpectedValue):
            logger.exception("tool %r returned output that does not match its outputSchema", tool.name)
            return text_result(f"Tool {tool.name!r} returned output that does not match its outputSchema", is_error=True)
        if tool.wrap_output:
            structured = {"result": structured}
        text = value if isinstance(value, str) else to_json(structured if not tool.wrap_output else structured["result"]).decode()
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}
    if value is None:
        return {"content": [], "isError": False}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": False}
    if isinstance(value, BaseModel):
        structured = _dump(value)
        return {"content": [{"type": "text", "text": to_json(structured).decode()}], "structuredContent": structured, "isError": False}
    jsonable: Any = to_jsonable_python(value, fallback=str)
    result: dict[str, Any] = {"content": [{"type": "text", "text": to_json(jsonable).decode()}], "isError": False}
    if isinstance(jsonable, dict):
        result["structuredContent"] = jsonable
    return result
