"""Content-block builders for tool results (spec 2025-11-25 ``server/tools`` §Tool Result).

Each returns an ``mcp_types`` model; a tool may return one block or a list of them.
Binary data is given as ``bytes`` (base64-encoded here) or as an already base64 ``str``.
"""

from __future__ import annotations

import base64

import mcp_types as types

__all__ = ["audio_content", "embedded_blob_resource", "embedded_text_resource", "image_content", "text_content"]


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def text_content(text: str) -> types.TextContent:
    """``{"type": "text", "text": text}``."""
    return types.TextContent(type="text", text=text)


def image_content(data: bytes | str, mime_type: str = "image/png") -> types.ImageContent:
    """``{"type": "image", "data": <base64>, "mimeType": mime_type}`` from raw bytes or base64."""
    return types.ImageContent(type="image", data=_b64(data), mime_type=mime_type)


def audio_content(data: bytes | str, mime_type: str = "audio/wav") -> types.AudioContent:
    """``{"type": "audio", "data": <base64>, "mimeType": mime_type}`` from raw bytes or base64."""
    return types.AudioContent(type="audio", data=_b64(data), mime_type=mime_type)


def embedded_text_resource(uri: str, text: str, mime_type: str = "text/plain") -> types.EmbeddedResource:
    """``{"type": "resource", "resource": {"uri", "mimeType", "text"}}``."""
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    )


def embedded_blob_resource(uri: str, data: bytes, mime_type: str = "application/octet-stream") -> types.EmbeddedResource:
    """``{"type": "resource", "resource": {"uri", "mimeType", "blob": <base64>}}`` from raw
    bytes (encoded once, standard alphabet, padded, no line breaks)."""
    return types.EmbeddedResource(
        type="resource", resource=types.BlobResourceContents(uri=uri, mime_type=mime_type, blob=base64.b64encode(data).decode("ascii"))
    )
