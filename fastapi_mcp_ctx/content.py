"""Content-block builders for tool results (spec 2025-11-25 ``server/tools`` §Tool Result).

Each returns an ``mcp_types`` model; a tool may return one block or a list of them.
Binary data is given as ``bytes`` (base64-encoded here, once: standard RFC 4648 alphabet,
padded, no line breaks) or as an already base64 ``str``, which must be exactly that and is
never encoded again (:func:`strict_base64`; known fault B41).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["audio_content", "embedded_blob_resource", "embedded_text_resource", "image_content", "strict_base64", "text_content"]


def strict_base64(data: bytes | bytearray | memoryview | str) -> str:
    """``data`` as standard base64 text (RFC 4648 §4: ``+/`` alphabet, ``=`` padding, no line
    breaks): bytes-like data is encoded; a ``str`` is returned as it is when it already is
    canonical base64 of some bytes, never encoded a second time.

    Raises:
        TypeError: neither bytes-like nor ``str``.
        ValueError: a ``str`` that is not canonical standard base64 (URL-safe alphabet,
            missing padding, whitespace or line breaks, non-zero trailing bits).
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        return base64.b64encode(data).decode("ascii")
    if not isinstance(data, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"must be bytes or base64 text, not {type(data).__name__}")
    try:
        decoded = base64.b64decode(data.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error) as exc:
        raise ValueError("is not standard base64 text (RFC 4648 alphabet with padding, no line breaks)") from exc
    if base64.b64encode(decoded).decode("ascii") != data:
        raise ValueError("is not canonical base64 (non-zero trailing bits)")
    return data


def _b64(data: bytes | str) -> str:
    return strict_base64(data)


def text_content(text: str) -> types.TextContent:
    """``{"type": "text", "text": text}``."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return types.TextContent(type="text", text=text)


def image_content(data: bytes | str, mime_type: str = "image/png") -> types.ImageContent:
    """``{"type": "image", "data": <base64>, "mimeType": mime_type}`` from raw bytes or base64."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return types.ImageContent(type="image", data=_b64(data), mime_type=mime_type)


def audio_content(data: bytes | str, mime_type: str = "audio/wav") -> types.AudioContent:
    """``{"type": "audio", "data": <base64>, "mimeType": mime_type}`` from raw bytes or base64."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return types.AudioContent(type="audio", data=_b64(data), mime_type=mime_type)


def embedded_text_resource(uri: str, text: str, mime_type: str = "text/plain") -> types.EmbeddedResource:
    """``{"type": "resource", "resource": {"uri", "mimeType", "text"}}``."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    )


def embedded_blob_resource(uri: str, data: bytes, mime_type: str = "application/octet-stream") -> types.EmbeddedResource:
    """``{"type": "resource", "resource": {"uri", "mimeType", "blob": <base64>}}`` from raw
    bytes (encoded once, standard alphabet, padded, no line breaks)."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return types.EmbeddedResource(
        type="resource", resource=types.BlobResourceContents(uri=uri, mime_type=mime_type, blob=base64.b64encode(data).decode("ascii"))
    )
