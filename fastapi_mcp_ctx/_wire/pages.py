"""Cursor pagination of the list methods (``tools/list``, ``prompts/list``, ``resources/list``,
``resources/templates/list``).

A cursor is opaque to the client: base64url of ``<list>:<offset>``, so a cursor of one list is
refused by another (-32602), as are forged, empty-offset and stale cursors (the offset must
fall inside the current listing); the last page carries no ``nextCursor`` and every cursor
advances (known fault B37; spec 2025-11-25 ``server/utilities/pagination``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidCursorError

__all__ = ["decode_cursor", "encode_cursor", "paginate"]


def encode_cursor(kind: str, offset: int) -> str:
    """The cursor of ``kind``'s page starting at ``offset``."""
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode().rstrip("=")


def decode_cursor(kind: str, cursor: Any, total: int) -> int:
    """The offset ``cursor`` names in ``kind``'s listing of ``total`` items (0 without a cursor).

    Raises:
        InvalidCursorError: not a cursor of ``kind``, or stale (the listing shrank).
    """
    if cursor is None or cursor == "":
        return 0
    if not isinstance(cursor, str) or len(cursor) > 64:
        raise InvalidCursorError("Invalid cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise InvalidCursorError("Invalid cursor") from exc
    prefix = f"{kind}:"
    if not raw.startswith(prefix) or not raw[len(prefix) :].isdigit():
        raise InvalidCursorError("Invalid cursor")
    offset = int(raw[len(prefix) :])
    if offset <= 0 or offset >= total:
        raise InvalidCursorError("Invalid cursor: the listing changed or the cursor is stale")
    return offset


def paginate(kind: str, member: str, items: Sequence[dict[str, Any]], cursor: Any, page_size: int) -> dict[str, Any]:
    """``{member: items[page], "nextCursor"?: ...}`` for the page ``cursor`` names."""
    start = decode_cursor(kind, cursor, len(items))
    end = start + page_size
    page: dict[str, Any] = {member: list(items[start:end])}
    if end < len(items):
        page["nextCursor"] = encode_cursor(kind, end)
    return page
