"""A 2025 session's client metadata (``initialize``'s ``capabilities`` and ``clientInfo``) kept
compact: its JSON bytes, parsed on use.

``MCP_MAX_CLIENT_METADATA_BYTES`` bounds the metadata as compact JSON; parsed into Python objects
it takes about eight times that (a dict, a str or an int per JSON value: issue 24 item 7 measured
526 KB per session for 63,748 bytes). An in-memory session therefore keeps the bytes the bound
measured, and the parsed form lives only while a request uses it, or while the session is among
the most recently parsed ones whose metadata is small (:data:`HOT_ENTRIES` sessions of at most
:data:`HOT_MAX_BYTES` bytes), so the retained size per session is the bound plus a fixed overhead
(``bench/bench_sessions.py --capabilities-bytes``, ``bench/README.md``).

A hot session's record holds its parsed form itself, so a request of it reads one attribute (no
look-up in a cache, no recency bookkeeping: the hot set is first in, first out); the record parsed
:data:`HOT_ENTRIES` parses later is told to forget it (:func:`keep_hot`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Final, Protocol

__all__ = ["HOT_ENTRIES", "HOT_MAX_BYTES", "HotHolder", "encode_metadata", "keep_hot", "parse_metadata"]

HOT_ENTRIES: Final = 256
"""Sessions whose records keep their parsed metadata (the most recently parsed ones)."""

HOT_MAX_BYTES: Final = 4096
"""Metadata larger than this many bytes of JSON is parsed on every use, never kept (the hot records
hold at most ``HOT_ENTRIES * HOT_MAX_BYTES`` bytes of JSON parsed: about 8 MB)."""

Parsed = tuple[dict[str, Any], dict[str, Any] | None]


class HotHolder(Protocol):
    """What keeps a parsed form while it is hot (a session record)."""

    def forget_parsed(self) -> None:
        """Drop the parsed form (it is parsed again on its next use)."""
        ...


_hot: OrderedDict[str, HotHolder] = OrderedDict()


def encode_metadata(capabilities: dict[str, Any], client_info: dict[str, Any] | None) -> bytes:
    """Compact UTF-8 JSON of ``{"capabilities": ..., "clientInfo": ...}``: what a session keeps, and
    what ``MCP_MAX_CLIENT_METADATA_BYTES`` measures."""
    kept = {"capabilities": capabilities, "clientInfo": client_info}
    return json.dumps(kept, separators=(",", ":"), ensure_ascii=False).encode()


def parse_metadata(raw: bytes) -> Parsed:
    """``(capabilities, clientInfo)`` of ``raw`` (from :func:`encode_metadata`), parsed anew.

    Raises:
        ValueError / KeyError: ``raw`` is not what :func:`encode_metadata` makes.
    """
    data: dict[str, Any] = json.loads(raw)
    return data["capabilities"], data["clientInfo"]


def keep_hot(key: str, holder: HotHolder) -> None:
    """Count ``holder`` (the session ``key``'s record, which just parsed its metadata and keeps
    the parsed form) among the hot ones; of more than :data:`HOT_ENTRIES`, the one that parsed
    first forgets its parsed form, and so does an earlier holder of the same ``key``.

    The objects a holder keeps are shared by the requests of that session while it is hot:
    callers read them, never mutate them (``ctx.client_capabilities`` is a ``Mapping``;
    ``ctx.client.capabilities`` returns a copy).
    """
    earlier = _hot.pop(key, None)
    if earlier is not None and earlier is not holder:
        earlier.forget_parsed()
    _hot[key] = holder
    if len(_hot) > HOT_ENTRIES:
        _hot.popitem(last=False)[1].forget_parsed()
