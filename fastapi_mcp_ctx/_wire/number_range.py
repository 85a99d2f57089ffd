"""Numbers beyond the range this server accepts, found: a pre-scan of JSON text and a walk of
parsed values (pure, no I/O). Nothing here refuses: the callers do.

No ``inf`` or ``nan`` ever reaches a handler. ``Infinity`` and ``NaN`` are not JSON
(RFC 8259 §6), so a body holding them is a parse error (``-32700``). A literal such as
``1e400`` *is* JSON, but beyond the range this server accepts (RFC 8259 §6 and §9 let an
implementation limit it; here: finite IEEE 754 doubles, as RFC 8259 §6 advises for
interoperability). It is therefore a fault of the value, not of the text: ``-32602`` with the
id echoed when it sits in ``params``, ``-32600`` elsewhere
(:func:`~fastapi_mcp_ctx._wire.jsonrpc.parse_message`), and inside the ``arguments`` of a
``tools/call`` an argument error (an ``isError`` result naming the field, spec 2025-11-25
``server/tools`` §Error Handling), carried as
:attr:`~fastapi_mcp_ctx._wire.jsonrpc.JsonRpcRequest.out_of_range`. The other callers:
``_handlers.resolve`` pre-scans a call's arguments text with :func:`may_overflow` (an integer
gone ``inf`` in a ``float``), ``_handlers.results`` refuses a tool output holding an ``inf`` or
``nan`` (:func:`non_finite_paths`).

Imports nothing of the package: the frame's parser (``jsonrpc``) sits at the bottom of the
longest import chain (``tests/test_import_graph.py``), and a cold path should not lengthen it.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

__all__ = ["OUT_OF_RANGE", "may_overflow", "non_finite_paths"]

# A number overflows a double only with a 3-digit exponent or 200+ digits before it (the
# value is below 10**(digits + exponent)): bodies without either skip the walk.
_BIG_EXPONENT: Final = re.compile(rb"[eE][+-]?[0-9]{3}")
_LONG_DIGITS: Final = re.compile(rb"[0-9]{200}")  # two searches: twice as fast as one alternation
_NUMBER_SHAPE: Final = bytes.maketrans(b"0123456789E+", b"0000000000e-")
"""``may_overflow``'s view of a longer body: ``[0-9]{200}`` becomes 200 zeros, ``[eE][+-]?[0-9]{3}``
``e000`` or ``e-000`` (callgrind, a 2026 envelope's 279 bytes: 39.2k → 14.7k instructions; on a
2025 call's ~100 bytes and its arguments the regular expressions cost ~4k less a call)."""
_SHAPE_FROM: Final = 160
_LONG_RUN: Final = b"0" * 200
OUT_OF_RANGE: Final = (
    "number out of range (JSON numbers must fit a finite IEEE 754 double, integers at most 4300 digits)"
)


def may_overflow(data: bytes) -> bool:
    """True when ``data`` (JSON text) may hold a number that overflows a double: a 3-digit
    exponent or a run of 200+ digits; False means it holds none (the walks can be skipped)."""
    if len(data) < _SHAPE_FROM:  # short: the two regular expressions cost less than the translated copy
        return _LONG_DIGITS.search(data) is not None or _BIG_EXPONENT.search(data) is not None
    shape = data.translate(_NUMBER_SHAPE)  # digits → "0", "E" → "e", "+" → "-": three substring searches
    return (shape.count(48) >= 200 and shape.find(_LONG_RUN) >= 0) or shape.find(b"e000") >= 0 or shape.find(b"e-000") >= 0  # 48: "0"


def non_finite_paths(value: Any) -> list[str]:
    """Dotted paths (``params.arguments.x.0``) of every ``inf``/``nan`` float in ``value``."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                found.append(path)
        elif isinstance(node, dict):
            items: dict[str, Any] = node  # pyright: ignore[reportUnknownVariableType]
            stack.extend((f"{path}.{key}" if path else key, child) for key, child in items.items())
        elif isinstance(node, list):
            children: list[Any] = node  # pyright: ignore[reportUnknownVariableType]
            stack.extend((f"{path}.{index}" if path else str(index), child) for index, child in enumerate(children))
    return sorted(found)
