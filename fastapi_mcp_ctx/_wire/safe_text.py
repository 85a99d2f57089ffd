"""The last check of every outgoing JSON-RPC message: text any JSON client can read.

Two kinds of value a handler can hand back encode to JSON that clients cannot read, though
no validator before the writer sees them:

- a ``str`` holding a lone UTF-16 surrogate (``"\\udcff"``: what ``os.listdir`` and
  ``os.fsdecode`` make of an undecodable file name, with ``surrogateescape``): not UTF-8, so
  the encoder raises (the call used to end as an HTTP 500 or a dead stdio line);
- an ``int`` of more than :data:`MAX_INT_DIGITS` digits: valid JSON, but Python's ``json`` and
  pydantic (the official Python SDK) refuse to parse it ("number out of range"), so the whole
  message is lost on the client side (the request waits for an answer that never parses);
  this server refuses such numbers on input for the same reason.

:func:`encode` writes the message as ``pydantic_core.to_json`` does and, only when one of
these is present, writes it again repaired: each lone surrogate becomes U+FFFD (the Unicode
replacement character), each such integer its exact decimal digits as a JSON string; the
server log names the paths (an error: the handler's output was wrong). Like ``NaN`` written as
the string ``"NaN"`` (``_wire.jsonrpc.dumps``), the message stays readable and never silently
drops or invents a value. The checks cost nothing on ordinary messages: the surrogate case
is the encoder's own failure, and the integer scan runs only on messages longer than
``MAX_INT_DIGITS`` bytes (a search of digit runs, then a walk only when one is found).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final

from pydantic_core import PydanticSerializationError, to_json

__all__ = ["MAX_INT_DIGITS", "encode", "long_checked", "repaired", "unencodable"]

logger = logging.getLogger("fastapi_mcp_ctx")

MAX_INT_DIGITS: Final = 4300
"""The longest integer (decimal digits) written as a number: CPython's default
``sys.get_int_max_str_digits()`` and pydantic's parse limit."""

_LONG_RUN: Final = re.compile(rb"(?<![0-9])[0-9]{%d}" % (MAX_INT_DIGITS + 1))  # each run tried once, at its start


def _clean_text(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def repaired(value: Any, path: str = "", found: list[str] | None = None) -> Any:
    """A copy of ``value`` (JSON-ready: dicts, lists, scalars) with lone surrogates replaced by
    U+FFFD and integers of more than :data:`MAX_INT_DIGITS` digits written as strings;
    ``found`` collects the dotted paths changed."""
    if isinstance(value, str):
        if _has_surrogate(value):
            if found is not None:
                found.append(path or "(message)")
            return _clean_text(value)
        return value
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_DIGITS * 3:  # at least ~903 digits: count them exactly
            digits = to_json(value)
            if len(digits.lstrip(b"-")) > MAX_INT_DIGITS:
                if found is not None:
                    found.append(path or "(message)")
                return digits.decode()
        return value
    if isinstance(value, dict):
        items: dict[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]
        return {
            (_clean_text(k) if isinstance(k, str) and _has_surrogate(k) else k): repaired(v, f"{path}.{k}" if path else str(k), found)
            for k, v in items.items()
        }
    if isinstance(value, (list, tuple)):
        children: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        return [repaired(v, f"{path}.{i}" if path else str(i), found) for i, v in enumerate(children)]
    return value


def _rewrite(message: Any, why: str) -> bytes:
    found: list[str] = []
    fixed = repaired(message, "", found)
    if found:
        where = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        logger.error("an outgoing message held %s at %s: written repaired (U+FFFD / the integer as a string)", why, where)
    return to_json(fixed, inf_nan_mode="strings")


def encode(message: Any) -> bytes:
    """``message`` as compact JSON bytes any JSON client can parse (module docstring).

    Raises:
        PydanticSerializationError: a value that is not JSON-ready at all (an object the
            encoder does not know), as ``to_json`` does.
    """
    try:
        encoded = to_json(message, inf_nan_mode="strings")
    except PydanticSerializationError as exc:
        return unencodable(message, exc)
    return encoded if len(encoded) <= MAX_INT_DIGITS else long_checked(message, encoded)


def unencodable(message: Any, exc: PydanticSerializationError) -> bytes:
    """:func:`encode`'s answer when ``to_json(message, inf_nan_mode="strings")`` raised ``exc``:
    ``message`` written repaired (a lone surrogate), else ``exc`` raised again."""
    if "surrogates not allowed" not in str(exc):
        raise exc
    return _rewrite(message, "text that is not valid Unicode (a lone surrogate)")


def long_checked(message: Any, encoded: bytes) -> bytes:
    """:func:`encode`'s answer for ``encoded``, ``message``'s JSON when longer than
    :data:`MAX_INT_DIGITS` bytes: rewritten when it holds an over-long integer, else itself."""
    if _LONG_RUN.search(encoded) is not None:
        found: list[str] = []
        fixed = repaired(message, "", found)
        if found:
            logger.error(
                "an outgoing message held an integer of more than %d digits (JSON clients cannot parse it) at %s: written as a string",
                MAX_INT_DIGITS,
                ", ".join(found[:3]),
            )
            return to_json(fixed, inf_nan_mode="strings")
    return encoded
