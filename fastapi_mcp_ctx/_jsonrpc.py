"""JSON-RPC 2.0 front door: one validator for both protocol eras.

``parse_message(body)`` turns the raw POST body into exactly one of
:class:`JsonRpcRequest`, :class:`JsonRpcNotification` or :class:`JsonRpcResponse`,
or raises :class:`~fastapi_mcp_ctx.errors.ParseError` (invalid UTF-8 or JSON) /
:class:`~fastapi_mcp_ctx.errors.InvalidRequestError` (batch arrays, non-object
``params``, a bad ``jsonrpc`` member, an id that is neither a string nor an integer).

Ids are kept exactly as sent: ``0``, ``7`` and ``"7"`` are three different ids
(spec 2025-11-25 ``basic`` §Requests). Encoding uses ``pydantic_core.to_json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pydantic_core import from_json, to_json

from .errors import InvalidRequestError, McpError, ParseError

__all__ = [
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcResponse",
    "RequestId",
    "dumps",
    "error_message",
    "notification_message",
    "parse_message",
    "result_message",
]

RequestId = str | int
"""A JSON-RPC request id: a string or an integer, never null, never a float or a bool."""

_BATCH_MESSAGE: Final = "Body must be a single JSON-RPC request or notification object"


@dataclass(frozen=True, slots=True)
class JsonRpcRequest:
    """A request: ``{"jsonrpc": "2.0", "id": str | int, "method": str, "params"?: object}``."""

    id: RequestId
    method: str
    params: dict[str, Any]
    has_params: bool


@dataclass(frozen=True, slots=True)
class JsonRpcNotification:
    """A notification (no ``id`` member): never answered with a body (HTTP 202)."""

    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class JsonRpcResponse:
    """A response from the client to a server→client request: ``result`` or ``error``."""

    id: RequestId | None
    result: Any
    error: dict[str, Any] | None


Message = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def parse_message(body: bytes) -> Message:
    """Parse one JSON-RPC message from ``body`` (bytes, UTF-8 JSON).

    Raises:
        ParseError: ``body`` is not valid UTF-8 or not valid JSON (``-32700``).
        InvalidRequestError: a batch array, a non-object message, ``jsonrpc`` other than
            ``"2.0"``, a ``method`` that is not a string, ``params`` that is not an object,
            or an ``id`` that is null, a float or a bool (``-32600``). When the id could be
            read it is kept in ``exc.request_id`` so the error can echo it.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError("Parse error: body is not valid UTF-8") from exc
    try:
        raw: Any = from_json(text, allow_inf_nan=False)
    except ValueError as exc:
        raise ParseError("Parse error: body is not valid JSON (or nests too deeply)") from exc
    if isinstance(raw, list):
        raise InvalidRequestError(_BATCH_MESSAGE)
    if not isinstance(raw, dict):
        raise InvalidRequestError(_BATCH_MESSAGE)
    obj: dict[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
    if obj.get("jsonrpc") != "2.0":
        raise _invalid('The "jsonrpc" member must be exactly "2.0"', obj)
    method = obj.get("method")
    if method is None:
        if "id" in obj and ("result" in obj) != ("error" in obj):
            rid = obj["id"]
            if rid is not None and not _valid_id(rid):
                raise InvalidRequestError("Invalid response id")
            error = obj.get("error")
            if error is not None and not isinstance(error, dict):
                raise InvalidRequestError('The "error" member must be an object')
            return JsonRpcResponse(rid, obj.get("result"), error)  # pyright: ignore[reportUnknownArgumentType]
        raise _invalid('The "method" member is required', obj)
    if not isinstance(method, str):
        raise _invalid('The "method" member must be a string', obj)
    params: Any = obj.get("params")
    has_params = params is not None
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        raise _invalid('The "params" member must be an object', obj)
    if "id" not in obj:
        return JsonRpcNotification(method, params)  # pyright: ignore[reportUnknownArgumentType]
    rid = obj["id"]
    if not _valid_id(rid):
        raise InvalidRequestError('The "id" member must be a string or an integer')
    return JsonRpcRequest(rid, method, params, has_params)  # pyright: ignore[reportUnknownArgumentType]


def _invalid(message: str, obj: dict[str, Any]) -> InvalidRequestError:
    exc = InvalidRequestError(message)
    rid = obj.get("id")
    exc.request_id = rid if _valid_id(rid) else None  # type: ignore[attr-defined]
    return exc


def request_id_of(exc: McpError) -> RequestId | None:
    """The request id an early error could still read (``None`` when unreadable)."""
    rid: Any = getattr(exc, "request_id", None)
    return rid if _valid_id(rid) else None


def dumps(message: dict[str, Any]) -> bytes:
    """Compact JSON bytes of a message (UTF-8, no spaces)."""
    return to_json(message)


def result_message(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "id": id, "result": result}``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId | None, error: McpError) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "id": id | null, "error": {...}}``; ``id`` is kept even when null."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}


def notification_message(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "method": method, "params"?: params}``."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message
