"""A 2025 session's client metadata (``initialize``'s ``capabilities`` and ``clientInfo``) kept
compact: its JSON bytes, parsed on use.

``MCP_MAX_CLIENT_METADATA_BYTES`` bounds the metadata as compact JSON; parsed into Python objects
it takes about eight times that (a dict, a str or an int per JSON value: issue 24 item 7 measured
526 KB per session for 63,748 bytes). An in-memory session therefore keeps the bytes the bound
measured, and the parsed form lives only while a request uses it, or in a small cache of the
most recently used sessions whose metadata is small (:data:`HOT_ENTRIES` entries of at most
:data:`HOT_MAX_BYTES` bytes), so the retained size per session is the bound plus a fixed overhead
(``bench/bench_sessions.py --capabilities-bytes``, ``bench/README.md``).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Final

__all__ = ["HOT_ENTRIES", "HOT_MAX_BYTES", "encode_metadata", "parse_metadata"]

HOT_ENTRIES: Final = 256
"""Sessions whose parsed metadata stays cached (the most recently used ones)."""

HOT_MAX_BYTES: Final = 4096
"""Metadata larger than this many bytes of JSON is parsed on every use, never cached (the cache
holds at most ``HOT_ENTRIES * HOT_MAX_BYTES`` bytes of JSON parsed: about 8 MB)."""

Parsed = tuple[dict[str, Any], dict[str, Any] | None]

_hot: OrderedDict[str, tuple[bytes, Parsed]] = OrderedDict()


def encode_metadata(capabilities: dict[str, Any], client_info: dict[str, Any] | None) -> bytes:
    """Compact UTF-8 JSON of ``{"capabilities": ..., "clientInfo": ...}``: what a session keeps, and
    what ``MCP_MAX_CLIENT_METADATA_BYTES`` measures."""
    kept = {"capabilities": capabilities, "clientInfo": client_info}
    return json.dumps(kept, separators=(",", ":"), ensure_ascii=False).encode()


def parse_metadata(key: str, raw: bytes) -> Parsed:
    """``(capabilities, clientInfo)`` of ``raw`` (from :func:`encode_metadata`), for the session
    ``key``: from the hot cache when this session's same bytes were parsed lately, else parsed
    (and cached when ``raw`` is at most :data:`HOT_MAX_BYTES` long).

    The objects returned are shared by the requests of that session until it drops out of the
    cache: callers read them, never mutate them (``ctx.client_capabilities`` is a ``Mapping``;
    ``ctx.client.capabilities`` returns a copy).
    """
    entry = _hot.get(key)
    if entry is not None and (entry[0] is raw or entry[0] == raw):
        _hot.move_to_end(key)
        return entry[1]
    data: dict[str, Any] = json.loads(raw)
    parsed: Parsed = (data["capabilities"], data["clientInfo"])
    if len(raw) <= HOT_MAX_BYTES:
        _hot[key] = (raw, parsed)
        _hot.move_to_end(key)
        if len(_hot) > HOT_ENTRIES:
            _hot.popitem(last=False)
    elif entry is not None:
        del _hot[key]
    return parsed
