"""JSON-RPC 2.0 front door: one validator for both protocol eras.

``parse_message(body)`` turns the raw POST body into exactly one of
:class:`JsonRpcRequest`, :class:`JsonRpcNotification` or :class:`JsonRpcResponse`,
or raises :class:`~fastapi_mcp_ctx.errors.ParseError` (invalid UTF-8 or JSON) /
:class:`~fastapi_mcp_ctx.errors.InvalidRequestError` (batch arrays, non-object
``params``, a bad ``jsonrpc`` member, an id that is neither a string nor an integer).

Ids are kept exactly as sent: ``0``, ``7`` and ``"7"`` are three different ids
(spec 2025-11-25 ``basic`` §Requests). Encoding uses ``pydantic_core.to_json``.

Numbers: a ``1e400`` (or an integer of more than 4300 digits) is a fault of the value: ``-32602``
in ``params``, ``-32600`` elsewhere, :attr:`JsonRpcRequest.out_of_range` inside ``tools/call``
arguments (the rules and the scans: :mod:`~fastapi_mcp_ctx._wire.number_range`).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any, Final

from pydantic_core import PydanticSerializationError, from_json, to_json

from ..errors import InvalidParamsError, InvalidRequestError, MalformedAnswerError, McpError, ParseError
from .number_range import OUT_OF_RANGE, may_overflow, non_finite_paths
from .safe_text import MAX_INT_DIGITS, long_checked, unencodable

__all__ = [
    "EncodedResult",
    "JsonRpcNotification",
    "JsonRpcRequest",
    "JsonRpcResponse",
    "RequestId",
    "dumps",
    "error_message",
    "notification_message",
    "parse_message",
    "request_id_of",
    "result_message",
]

RequestId = str | int
"""A JSON-RPC request id: a string or an integer, never null, never a float or a bool."""

_BATCH_MESSAGE: Final = "Body must be a single JSON-RPC request or notification object"
_DUPLICATE_SCOPES: Final = ("message", "params", "params._meta", "params.arguments")


@dataclass(slots=True)
class JsonRpcRequest:
    """A request: ``{"jsonrpc": "2.0", "id": str | int, "method": str, "params"?: object}``.

    Read-only by convention, not frozen: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__`` (238 bytes of bytecode, several times a plain one's), and every call
    makes one."""

    id: RequestId
    method: str
    params: dict[str, Any]
    has_params: bool
    out_of_range: tuple[str, ...] = ()
    """``tools/call`` only: dotted paths inside ``params.arguments`` whose number overflowed."""


@dataclass(slots=True)
class JsonRpcNotification:
    """A notification (no ``id`` member): never answered with a body (HTTP 202). Read-only by
    convention (as :class:`JsonRpcRequest`)."""

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
    try:  # the bytes themselves: the parser refuses what is not UTF-8 (no decoded copy of the body)
        raw: Any = from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        raw = _with_long_numbers_overflowed(_decoded(body), exc)
    if not isinstance(raw, dict):
        raise InvalidRequestError(_BATCH_MESSAGE)
    obj: dict[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
    try:  # what the parser kept, re-encoded once: both checks below read it
        kept: bytes | None = to_json(obj)
    except ValueError:
        kept = None
    # (bytes.find, not ``in``: ``in`` first tries its operand as an integer, a TypeError made and dropped)
    may_hold = may_overflow(body) if kept is None else (kept.find(b"Infinity") >= 0 or kept.find(b"NaN") >= 0)  # an inf/nan is written so
    overflowed = non_finite_paths(obj) if may_hold else None
    if kept is None or body.find(b"\\") >= 0 or kept.count(b'"') != body.count(b'"'):  # _each_key_once, inline
        _refuse_duplicate_keys(body, obj, kept)
    if obj.get("jsonrpc") != "2.0":
        raise _invalid('The "jsonrpc" member must be exactly "2.0"', obj)
    method = obj.get("method")
    if not isinstance(method, str):
        return _not_a_request(obj, method, overflowed)
    params: Any = obj.get("params")
    has_params = params is not None
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        raise _invalid('The "params" member must be an object', obj)
    if "id" not in obj:
        if overflowed:
            _refuse_overflow(overflowed, None)
        return JsonRpcNotification(method, params)  # pyright: ignore[reportUnknownArgumentType]
    rid = obj["id"]
    kind: Any = type(rid)  # pyright: ignore[reportUnknownVariableType]
    if kind is not int and kind is not str and not _valid_id(rid):  # the parser's ints and strs are exact: one test each
        raise InvalidRequestError('The "id" member must be a string or an integer')
    request_params: dict[str, Any] = params  # pyright: ignore[reportUnknownVariableType]
    if overflowed:
        return _overflowed_request(rid, method, request_params, has_params, overflowed)
    return JsonRpcRequest(rid, method, request_params, has_params)


def _not_a_request(obj: dict[str, Any], method: Any, overflowed: list[str] | None) -> JsonRpcResponse:
    """``parse_message`` of a message without a string ``method``: a response, or the error."""
    if method is None:
        if "id" in obj and ("result" in obj) != ("error" in obj):
            rid = obj["id"]
            if rid is not None and not _valid_id(rid):
                raise InvalidRequestError("Invalid response id")
            error = obj.get("error")
            if error is not None and not isinstance(error, dict):
                if rid is not None:
                    raise MalformedAnswerError('The "error" member must be an object', rid)
                raise InvalidRequestError('The "error" member must be an object')
            if overflowed:
                raise InvalidRequestError(f"{overflowed[0]}: {OUT_OF_RANGE}")
            return JsonRpcResponse(rid, obj.get("result"), error)  # pyright: ignore[reportUnknownArgumentType]
        if "result" in obj and "error" in obj and _valid_id(obj.get("id")):
            raise MalformedAnswerError('A response carries exactly one of "result" and "error"', obj["id"])
        raise _invalid('The "method" member is required', obj)
    raise _invalid('The "method" member must be a string', obj)


def _overflowed_request(rid: RequestId, method: str, params: dict[str, Any], has_params: bool, overflowed: list[str]) -> JsonRpcRequest:
    """``parse_message``'s request holding a number that overflowed (``overflowed``: their paths):
    inside ``tools/call`` arguments, carried as ``out_of_range``; anywhere else refused."""
    in_arguments: tuple[str, ...] = ()
    if method == "tools/call" and isinstance(params.get("arguments"), dict):
        prefix = "params.arguments."
        in_arguments = tuple(p[len(prefix) :] for p in overflowed if p.startswith(prefix))
        overflowed = [p for p in overflowed if not p.startswith(prefix)]
    _refuse_overflow(overflowed, rid)
    return JsonRpcRequest(rid, method, params, has_params, in_arguments)


def _decoded(body: bytes) -> str:
    """``body`` as text, for the paths that need it (a refused or re-read body): ``from_json``
    parses the bytes and accepts exactly the bodies that are valid UTF-8 (tests/test_jsonrpc_bytes.py).

    Raises:
        ParseError: ``body`` is not valid UTF-8 (``-32700``).
    """
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError("Parse error: body is not valid UTF-8") from exc


def _with_long_numbers_overflowed(text: str, error: ValueError) -> Any:
    """Parse ``text`` whose number literal has more digits than Python's int-str limit (4300):
    valid JSON, but beyond the range this server accepts, so each such literal is read as an
    overflowing ``1e400`` and judged like one (:mod:`.number_range`). Any other fault: ParseError."""
    limit = sys.get_int_max_str_digits()
    long_number = re.compile(rf"[0-9]{{{limit + 1},}}(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?") if limit else None
    if long_number is not None and str(error).startswith("number out of range") and long_number.search(text):
        try:
            return from_json(long_number.sub("1e400", text), allow_inf_nan=False)
        except ValueError:
            pass
    raise ParseError("Parse error: body is not valid JSON (or nests too deeply)") from error


class _Duplicated(dict[str, Any]):
    """An object of the strict re-parse that repeated a key (``keys_repeated``: those keys)."""

    keys_repeated: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    duplicated = _Duplicated(obj)
    duplicated.keys_repeated = []
    for key, _ in pairs:
        if key in seen:
            duplicated.keys_repeated.append(key)
        seen.add(key)
    return duplicated


def _encoded(obj: dict[str, Any]) -> bytes | None:
    """``obj`` re-encoded by ``to_json`` (an ``inf`` as ``Infinity``), or None when it cannot be."""
    try:
        return to_json(obj)
    except ValueError:
        return None


def _refuse_duplicate_keys(body: bytes, obj: dict[str, Any], kept: bytes | None = None) -> None:
    """Refuse a key repeated in the message object, ``params``, ``params._meta`` or
    ``params.arguments``: parsers disagree on which one wins (RFC 8259 §4: names SHOULD be
    unique), so a proxy could route or authorize what this server would not serve. Objects
    deeper inside argument values are judged by the tool's input schema alone. Fast path
    (:func:`_each_key_once`): with no escape in the body, the quotes of the body and of the
    parsed message re-encoded are counted; only otherwise is the body re-read with the stdlib
    parser (about 4 µs).

    Raises:
        InvalidRequestError: ``-32600``, naming the object and the key.
    """
    if body.find(b"\\") < 0 and _each_key_once(body, obj, kept):
        return
    try:
        strict: Any = json.loads(_decoded(body), object_pairs_hook=_pairs, parse_int=_zero, parse_float=_zero, parse_constant=_zero)
    except (ValueError, RecursionError) as exc:
        raise ParseError("Parse error: body is not valid JSON (or nests too deeply)") from exc
    for where, scope in zip(_DUPLICATE_SCOPES, _scopes(strict), strict=True):
        if isinstance(scope, _Duplicated):
            key = scope.keys_repeated[0]
            exc = _invalid(f"Duplicate key {_short(key)!r} in the {where} object (JSON-RPC members must be unique)", obj)
            if where == "message" and "id" in scope.keys_repeated:
                exc.request_id = None  # type: ignore[attr-defined]  # which id would be a guess
            raise exc


def _each_key_once(body: bytes, obj: dict[str, Any], kept: bytes | None = None) -> bool:
    """True when the parser dropped no member of ``obj`` (so no key of the four checked objects,
    :func:`_scopes`, repeated), judged on the quotes of ``body`` (the bytes :func:`parse_message`
    parsed): in a body without backslashes
    every ``"`` delimits a string (a key or a string value), and no kept string needs an escape
    with a ``"`` in its encoding, so the parsed message re-encoded by ``to_json`` (C) holds as many
    quotes as the body exactly when every string of the body was kept. A repeated key makes the
    parser drop the earlier member, its key string with it: fewer quotes. False (a member dropped
    anywhere, even deep inside an argument value) sends the caller to the strict re-read, which
    decides on the four checked objects alone. One C count on each side; the string tokens found
    by a regular expression and counted in Python cost a 2026 envelope ~5× more."""
    if kept is None:  # ``obj`` re-encoded (parse_message passes its own)
        kept = _encoded(obj)
        if kept is None:  # the strict re-read decides
            return False
    return kept.count(b'"') == body.count(b'"')


def _scopes(obj: dict[str, Any]) -> list[dict[str, Any] | None]:
    """The message object, its ``params``, ``params._meta`` and ``params.arguments`` (None where
    not an object)."""
    params: Any = obj.get("params")
    if not isinstance(params, dict):
        return [obj, None, None, None]
    checked: dict[str, Any] = params  # pyright: ignore[reportUnknownVariableType]
    meta: Any = checked.get("_meta")
    arguments: Any = checked.get("arguments")
    return [obj, checked, meta if isinstance(meta, dict) else None, arguments if isinstance(arguments, dict) else None]


def _zero(_: str) -> int:
    return 0


def _short(key: str) -> str:
    return key if len(key) <= 64 else key[:63] + "…"


def _refuse_overflow(paths: list[str], request_id: RequestId | None) -> None:
    if not paths:
        return
    where = paths[0]
    exc: McpError = (
        InvalidParamsError(f"Invalid params: {where}: {OUT_OF_RANGE}", reason="number_out_of_range", data={"path": where})
        if where.startswith("params.")
        else InvalidRequestError(f"{where}: {OUT_OF_RANGE}", reason="number_out_of_range", data={"path": where})
    )
    exc.request_id = request_id  # type: ignore[attr-defined]
    raise exc


def _invalid(message: str, obj: dict[str, Any]) -> InvalidRequestError:
    exc = InvalidRequestError(message)
    rid = obj.get("id")
    exc.request_id = rid if _valid_id(rid) else None  # type: ignore[attr-defined]
    return exc


def request_id_of(exc: McpError) -> RequestId | None:
    """The request id an early error could still read (``None`` when unreadable)."""
    rid: Any = getattr(exc, "request_id", None)
    return rid if _valid_id(rid) else None


class EncodedResult(dict[str, Any]):
    """A result object that carries its own compact JSON encoding (``encoded``), made once for
    data that does not change between requests (a ``tools/list`` page): :func:`dumps` splices
    it into the message instead of encoding it again. Treat it as read-only: the encoding
    stands for the keys and values it was built with (one that gained or lost a key is encoded
    afresh)."""

    __slots__ = ("encoded", "size")

    def __init__(self, result: dict[str, Any], encoded: bytes) -> None:
        super().__init__(result)
        self.encoded = encoded
        self.size = len(self)


def dumps(message: dict[str, Any]) -> bytes:
    """Compact JSON bytes of a message (UTF-8, no spaces): always valid JSON (RFC 8259 §6).

    The values that enter a message refuse ``inf``/``nan`` themselves (a tool output: an
    ``isError`` result; progress: ``ValueError``; log data: the strings); one that still gets
    here is written as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, never as the
    bare ``NaN`` token of JavaScript (invalid JSON) nor silently as ``null``. A
    :func:`result_message` whose result is an :class:`EncodedResult` reuses its encoding. Text
    holding a lone surrogate and integers of more than 4300 digits are written repaired
    (:func:`fastapi_mcp_ctx._wire.safe_text.encode`), never as a 500 nor as a number clients cannot parse.
    """
    result = message.get("result")
    if type(result) is EncodedResult and len(result) == result.size and len(message) == 3 and "id" in message:
        return b'{"jsonrpc":"2.0","id":' + to_json(message["id"]) + b',"result":' + result.encoded + b"}"
    try:  # _wire.safe_text.encode, inline (one frame less a message)
        encoded = to_json(message, inf_nan_mode="strings")
    except PydanticSerializationError as exc:  # a lone surrogate: written repaired
        return unencodable(message, exc)
    return encoded if len(encoded) <= MAX_INT_DIGITS else long_checked(message, encoded)  # an over-long integer: written repaired


def result_message(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "id": id, "result": result}``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId | None, error: McpError) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "id": id | null, "error": {"code", "message", "data": {"requestId": id, ...}}}``.

    ``id`` is kept even when null; ``error`` is the one envelope of ``errors.py``.
    """
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error(request_id)}


def notification_message(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "method": method, "params"?: params}``."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message
