"""The W3C Trace Context a request carries: ``traceparent``, ``tracestate`` and ``baggage``, from
``params._meta`` (the three keys the spec reserves there without a prefix: ``basic`` §_meta,
SEP-414) or else from the HTTP headers of the same names (W3C Trace Context §3.2 ``traceparent``,
§3.3 ``tracestate``; W3C Baggage §3). Pure, no I/O: read as sent, validated only where used
(:func:`parse_traceparent`: an invalid value means no trace, never an error).

Imports nothing of the package: ``envelope`` sits at the bottom of the longest import chain
(``tests/test_import_graph.py``) and reads every request's trace through :func:`read_trace`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["TRACE_KEYS", "parse_traceparent", "read_trace"]

_TRACEPARENT: Final = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})\Z")
TRACE_KEYS: Final = frozenset(("traceparent", "tracestate", "baggage"))
"""The ``_meta`` keys and header names read (disjoint from both, as most requests are: no trace)."""


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """``(trace_id, parent_span_id)`` from a W3C ``traceparent``, or None when malformed/absent."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None or match.group(1) == "ff" or set(match.group(2)) == {"0"} or set(match.group(3)) == {"0"}:
        return None
    return match.group(2), match.group(3)


def read_trace(headers: Mapping[str, str], meta: dict[str, Any] | None) -> dict[str, str]:
    """The non-empty string values of :data:`TRACE_KEYS`, each from ``meta`` (``params._meta``)
    when it holds a string there, else from ``headers`` (lower-cased names)."""
    trace: dict[str, str] = {}
    if TRACE_KEYS.isdisjoint(headers) and (meta is None or TRACE_KEYS.isdisjoint(meta)):  # most requests: nothing to read
        return trace
    for key in ("traceparent", "tracestate", "baggage"):
        value: Any = meta.get(key) if meta is not None else None
        if not isinstance(value, str):
            value = headers.get(key)
        if isinstance(value, str) and value:
            trace[key] = value
    return trace
