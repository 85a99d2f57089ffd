"""``ctx.content``: content blocks a tool adds for the model beside its return value.

``ctx.content.image(png_bytes, "image/png")``, ``ctx.content.audio(wav_bytes, "audio/wav")``
and ``ctx.content(block)`` (any ``ContentBlock``: an ``mcp_types`` model or its wire dict)
collect blocks during the call; after the handler returns they are prepended to the result's
``content`` in call order, never put in ``structuredContent``. Error results carry none.

Binary data is encoded once, here: ``bytes`` become standard RFC 4648 base64 with padding and
no line breaks; a ``str`` must already be exactly that (it is never encoded a second time)
and anything else is refused (known fault B41). An image's ``mimeType`` must be ``image/*``,
an audio block's ``audio/*`` (RFC 6838 ``type/subtype``, parameters allowed). Every refusal is
a :class:`~fastapi_mcp_ctx.errors.DeclarationError`, raised where the handler adds the block.
Spec 2025-11-25 ``server/tools`` §Tool Result (Image Content, Audio Content).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from .._outputs import CallOutputs
from ..content import strict_base64
from ..errors import DeclarationError

if TYPE_CHECKING:
    import mcp_types as types

    from .call_state import CallState

__all__ = ["ContentCollector", "check_mime_type"]

_TOKEN: Final = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MIME: Final = re.compile(rf"^({_TOKEN})/{_TOKEN}(?:\s*;\s*{_TOKEN}=(?:{_TOKEN}|\"[^\"\\\r\n]*\"))*\Z")


@functools.cache
def _block() -> TypeAdapter[Any]:
    """The ``ContentBlock`` adapter, built at the first block given as a mapping."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return TypeAdapter(types.ContentBlock)


@functools.cache
def _models() -> tuple[type, ...]:
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    return (types.TextContent, types.ImageContent, types.AudioContent, types.EmbeddedResource, types.ResourceLink)


def check_mime_type(mime_type: object, kind: str) -> str:
    """``mime_type`` when it is an RFC 6838 ``kind/subtype`` (``image``, ``audio``).

    Raises:
        DeclarationError: not a string, not ``type/subtype``, or of another top-level type.
    """
    if not isinstance(mime_type, str):
        raise DeclarationError(f"ctx.content: a {kind} mimeType must be a string, not {type(mime_type).__name__}")
    match = _MIME.match(mime_type)
    if match is None or match.group(1).lower() != kind:
        raise DeclarationError(f"ctx.content: {mime_type!r} is not an {kind}/* media type (RFC 6838 type/subtype)")
    return mime_type


def _encoded(data: object, kind: str) -> str:
    try:
        return strict_base64(data)  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError) as exc:
        raise DeclarationError(f"ctx.content: {kind} data {exc}") from exc


def _wire_block(block: object) -> dict[str, Any]:
    """A checked content block as its wire dict."""
    import mcp_types as types  # noqa: PLC0415 - deferred: see _wire/versions.py
    try:
        model: Any = block if isinstance(block, _models()) else _block().validate_python(block)
    except PydanticValidationError as exc:
        problems = "; ".join(e["msg"] for e in exc.errors(include_url=False, include_input=False)[:3])
        raise DeclarationError(f"ctx.content: not a content block ({problems})") from exc
    if isinstance(model, (types.ImageContent, types.AudioContent)):
        kind = "image" if isinstance(model, types.ImageContent) else "audio"
        check_mime_type(model.mime_type, kind)
        _encoded(model.data, kind)  # a str must already be strict base64
    wire: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return wire


class ContentCollector:
    """``ctx.content`` (module docstring): ``image``, ``audio``, or call it with any block."""

    __slots__ = ("_call",)

    def __init__(self, call: CallState) -> None:
        self._call = call

    def _add(self, wire: dict[str, Any]) -> None:
        if self._call.method != "tools/call":
            raise DeclarationError(
                f"ctx.content adds blocks to a tool result; a {self._call.method} handler returns its content itself"
            )
        outputs = self._call.outputs
        if outputs is None:
            outputs = self._call.outputs = CallOutputs()
        outputs.blocks.append(wire)

    def __call__(self, block: types.ContentBlock | Mapping[str, Any]) -> None:
        """Add ``block`` (an ``mcp_types`` content model or its wire dict).

        Raises:
            DeclarationError: not a valid content block, an image/audio block whose data is not
                strict base64 or whose ``mimeType`` is of another type, or not in a tool call.
        """
        self._add(_wire_block(block))

    def image(self, data: bytes | bytearray | memoryview | str, mime_type: str = "image/png") -> None:
        """Add ``{"type": "image", "data": <base64>, "mimeType": mime_type}``.

        Args:
            data: the image's bytes (encoded here), or its strict base64 text.
            mime_type: ``image/*`` (``image/png``, ``image/svg+xml``...).
        Raises:
            DeclarationError: ``mime_type`` is not ``image/*``, ``data`` is neither bytes nor
                strict base64 text, or not in a tool call.
        """
        check_mime_type(mime_type, "image")
        self._add({"type": "image", "data": _encoded(data, "image"), "mimeType": mime_type})

    def audio(self, data: bytes | bytearray | memoryview | str, mime_type: str = "audio/wav") -> None:
        """Add ``{"type": "audio", "data": <base64>, "mimeType": mime_type}`` (as :meth:`image`,
        ``mime_type`` ``audio/*``)."""
        check_mime_type(mime_type, "audio")
        self._add({"type": "audio", "data": _encoded(data, "audio"), "mimeType": mime_type})

    @property
    def blocks(self) -> tuple[dict[str, Any], ...]:
        """The blocks added so far (wire dicts, copies of the list)."""
        outputs = self._call.outputs
        return tuple(outputs.blocks) if outputs is not None else ()

    def __repr__(self) -> str:
        return f"ContentCollector(blocks={len(self.blocks)})"
