"""JSON-RPC batches (an array of messages), the transport-independent part.

Protocol 2025-03-26 is the one revision with batches: its ``basic`` §Batching says an
implementation MUST support receiving them (on HTTP, ``basic/transports`` lets a POST body be
an array; on stdio a line may be one). 2024-11-05 has none (its ``basic`` pages define single
messages only); 2025-06-18 removed them, as does 2026-07-28. So an array is served only in a
session negotiated at :data:`BATCH_VERSION`; elsewhere it gets the single-message refusal of
``_wire.jsonrpc.parse_message`` (:func:`refusal`). JSON-RPC 2.0 §6: invalid JSON is one -32700
error, ``[]`` one -32600 error, each member is judged alone.

Here: :func:`starts_batch` (is a body an array), :func:`split_batch` (its members as JSON texts,
bounded by ``MCP_MAX_BATCH_SIZE``), :func:`refusal`, :func:`run_call` (one prepared call under
its cancel signal) and :func:`array_of` (the answer line). HTTP: ``_server/batch.py``; stdio:
``_stdio/batch.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from .._context.cancel_scope import new_cancel_scope
from .._transport.streams import Outbound, Reply
from .._wire.jsonrpc import dumps, parse_message
from ..errors import InvalidRequestError, McpError, ParseError
from .outcomes import PreparedCall

__all__ = ["BATCH_VERSION", "array_of", "refusal", "run_call", "split_batch", "starts_batch"]

BATCH_VERSION: Final = "2025-03-26"
"""The one negotiated protocol version whose sessions may send batches."""
_WHITESPACE: Final = b" \t\r\n"


def starts_batch(body: bytes) -> bool:
    """True when ``body`` (JSON text) opens with ``[`` after any whitespace: a batch array."""
    if not body:
        return False
    first = body[0]  # an int: ``in`` on bytes takes it directly (a bytes operand costs a TypeError made and dropped)
    if first == 0x5B:  # "["
        return True
    return first in _WHITESPACE and body.lstrip(_WHITESPACE)[:1] == b"["


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_STRICT: Final = json.JSONDecoder(parse_constant=_no_constant)


def split_batch(body: bytes, limit: int) -> list[bytes]:
    """The members of the batch array ``body``, each as its own JSON text (UTF-8 bytes), so that
    each is judged by ``parse_message`` exactly as a single message would be.

    Raises:
        ParseError: not UTF-8, not JSON, ``NaN`` / ``Infinity``, or nested too deeply (-32700).
        InvalidRequestError: an empty array, or more than ``limit`` members (-32600, HTTP 400).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError("Parse error: body is not valid UTF-8") from exc
    members: list[bytes] = []
    try:
        index = _skip(text, 0)
        if text[index : index + 1] != "[":
            raise ValueError("not an array")
        index += 1
        index = _skip(text, index)
        if text[index : index + 1] == "]":
            if _skip(text, index + 1) != len(text):
                raise ValueError("text after the array")
            raise InvalidRequestError("Invalid Request: the batch array is empty (JSON-RPC 2.0 §6)")
        while True:
            _, end = _STRICT.raw_decode(text, index)
            if len(members) == limit:
                raise InvalidRequestError(
                    f"Invalid Request: the batch holds more than {limit} messages (MCP_MAX_BATCH_SIZE); send fewer per POST",
                    reason="batch_too_large",
                    data={"maxBatchSize": limit},
                )
            members.append(text[index:end].encode())
            index = _skip(text, end)
            separator = text[index : index + 1]
            if separator == "]":
                if _skip(text, index + 1) != len(text):
                    raise ValueError("text after the array")
                return members
            if separator != ",":
                raise ValueError("expected ',' or ']'")
            index = _skip(text, index + 1)
    except (ValueError, RecursionError) as exc:
        raise ParseError("Parse error: body is not valid JSON (or nests too deeply)") from exc


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


def refusal(body: bytes) -> McpError:
    """What the single-message front door answers for ``body``: -32700 for bad JSON, else
    the -32600 of a body that is not one JSON-RPC message."""
    try:
        parse_message(body)
    except McpError as exc:
        return exc
    return InvalidRequestError("Body must be a single JSON-RPC request or notification object")


async def run_call(call: PreparedCall, outbound: Outbound) -> Reply | None:
    """Run a prepared call (``tools/call``, ``resources/read``...) with its signal bound to a
    cancel scope, as a single request's transport does; the runner's reply (the caller judges
    ``call.signal.reason``: a cancelled call's late result is dropped)."""
    signal = call.signal
    reply: Reply | None = None
    with new_cancel_scope() as handler_scope:
        signal.bind(handler_scope)
        try:
            reply = await call.runner(outbound)
        finally:
            signal.bind(None)
    return reply


def array_of(answers: Sequence[dict[str, Any] | None]) -> bytes | None:
    """The JSON array of the answers given (None slots left out), or None when there is none
    (JSON-RPC 2.0 §6: never an empty array)."""
    given = [dumps(answer) for answer in answers if answer is not None]
    return b"[" + b",".join(given) + b"]" if given else None
