"""What the client says about itself beyond capabilities: extensions, MCP Apps views and the
normalised ``openai/*`` caller hints of a request's ``_meta``.

Everything here is self-reported by the client and unverified: use it to shape a response
(a locale, an HTML view for a client that renders one), never to authenticate or authorize;
``ctx.auth`` holds the verified principal.

``openai/*`` keys read from ``params._meta`` (either era): ``openai/locale`` (fallback: the
older ``webplus/i18n``), ``openai/userAgent``, ``openai/userLocation`` (an object: ``city``,
``region``, ``country``, ``timezone`` strings, ``latitude`` / ``longitude`` numbers or
strings), ``openai/subject``, ``openai/session`` (→ ``conversation_id``),
``openai/organization``. A value of the wrong type, an empty or oversized string
(:data:`MAX_HINT_CHARS`; the user agent :data:`MAX_USER_AGENT_CHARS`) or a non-finite number
is dropped, never truncated or coerced; booleans are not numbers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["UI_EXTENSION", "VIEW_MIME_TYPE", "ClientLocation", "ClientUser", "extension_settings", "read_user", "supports_views"]

UI_EXTENSION: Final = "io.modelcontextprotocol/ui"
"""The MCP Apps extension id (``capabilities.extensions``)."""
VIEW_MIME_TYPE: Final = "text/html;profile=mcp-app"
"""The media type of an MCP Apps view, listed in the extension's ``mimeTypes``."""
MAX_HINT_CHARS: Final = 256
"""Characters of one hint (locale, subject, ids, location parts); longer ones are dropped."""
MAX_USER_AGENT_CHARS: Final = 1024
"""Characters of the user agent hint; a longer one is dropped."""
MAX_MIME_TYPES: Final = 64
"""``mimeTypes`` entries of the UI extension looked at by :func:`supports_views`."""


@dataclass(frozen=True, slots=True)
class ClientLocation:
    """The end user's approximate location as the client reports it (``openai/userLocation``)."""

    city: str | None = None
    region: str | None = None
    country: str | None = None
    timezone: str | None = None
    latitude: float | str | None = None
    longitude: float | str | None = None


@dataclass(frozen=True, slots=True)
class ClientUser:
    """Caller hints from ``_meta`` (``ctx.client.user``): self-reported, never proof of
    identity, membership or authorization (use ``ctx.auth``).

    Attributes:
        locale: BCP 47 tag (``"it-IT"``), from ``openai/locale`` or ``webplus/i18n``.
        user_agent: the host's user agent (``openai/userAgent``).
        location: :class:`ClientLocation` (``openai/userLocation``), or None.
        subject: an opaque subject hint (``openai/subject``).
        conversation_id: the chat thread (``openai/session``): application metadata, not an
            MCP session.
        organization_id: ``openai/organization``.
    """

    locale: str | None = None
    user_agent: str | None = None
    location: ClientLocation | None = None
    subject: str | None = None
    conversation_id: str | None = None
    organization_id: str | None = None


def _text(value: object, limit: int = MAX_HINT_CHARS) -> str | None:
    if isinstance(value, str) and value.strip() and len(value) <= limit:
        return value
    return None


def _coordinate(value: object) -> float | str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
        return number if math.isfinite(number) else None
    return _text(value, 64)


def _location(value: object) -> ClientLocation | None:
    if not isinstance(value, Mapping):
        return None
    raw: Mapping[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]
    location = ClientLocation(
        city=_text(raw.get("city")),
        region=_text(raw.get("region")),
        country=_text(raw.get("country")),
        timezone=_text(raw.get("timezone")),
        latitude=_coordinate(raw.get("latitude")),
        longitude=_coordinate(raw.get("longitude")),
    )
    return None if location == ClientLocation() else location


def read_user(meta: Mapping[str, Any] | None) -> ClientUser | None:
    """The normalised ``openai/*`` hints of ``meta`` (module docstring), None when none is valid."""
    if not meta:
        return None
    locale = _text(meta.get("openai/locale")) or _text(meta.get("webplus/i18n"))
    user = ClientUser(
        locale=locale,
        user_agent=_text(meta.get("openai/userAgent"), MAX_USER_AGENT_CHARS),
        location=_location(meta.get("openai/userLocation")),
        subject=_text(meta.get("openai/subject")),
        conversation_id=_text(meta.get("openai/session")),
        organization_id=_text(meta.get("openai/organization")),
    )
    return None if user == ClientUser() else user


def _declared(capabilities: Mapping[str, Any] | None, identifier: str) -> Mapping[str, Any] | None:
    """``capabilities.extensions[identifier]`` when both are objects, else None."""
    extensions = (capabilities or {}).get("extensions")
    if not isinstance(extensions, Mapping):
        return None
    declared: Mapping[str, Any] = extensions  # pyright: ignore[reportUnknownVariableType]
    settings = declared.get(identifier)
    if not isinstance(settings, Mapping):
        return None
    found: Mapping[str, Any] = settings  # pyright: ignore[reportUnknownVariableType]
    return found


def extension_settings(capabilities: Mapping[str, Any] | None, identifier: str) -> dict[str, Any] | None:
    """A deep copy of the settings object the client declared for extension ``identifier``
    (``capabilities.extensions[identifier]``), None when it declared none (or not an object)."""
    settings = _declared(capabilities, identifier)
    return copy.deepcopy(dict(settings)) if settings is not None else None


def supports_views(capabilities: Mapping[str, Any] | None) -> bool:
    """True when the client declares :data:`UI_EXTENSION` with :data:`VIEW_MIME_TYPE` in its
    ``mimeTypes`` (media type and parameter compared case-insensitively, spaces ignored)."""
    settings = _declared(capabilities, UI_EXTENSION)
    mime_types = settings.get("mimeTypes") if settings is not None else None
    if not isinstance(mime_types, list):
        return False
    wanted = VIEW_MIME_TYPE.replace(" ", "").lower()
    entries: list[Any] = mime_types[:MAX_MIME_TYPES]  # pyright: ignore[reportUnknownVariableType]
    return any(isinstance(entry, str) and entry.replace(" ", "").lower() == wanted for entry in entries)
