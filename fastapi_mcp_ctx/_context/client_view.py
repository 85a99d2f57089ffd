"""What the client says about itself: :class:`ClientView` (``ctx.client``: declared capabilities,
extensions, MCP Apps views) and the normalised ``openai/*`` caller hints of a request's ``_meta``.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import MissingCapabilityError

__all__ = [
    "UI_EXTENSION",
    "VIEW_MIME_TYPE",
    "ClientLocation",
    "ClientUser",
    "ClientView",
    "capability_object",
    "extension_settings",
    "read_user",
    "supports_views",
]

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


def _capability_present(capabilities: Mapping[str, Any] | None, name: str) -> bool:
    if not capabilities:
        return False
    head, _, tail = name.partition(".")
    value = capabilities.get(head)
    if not isinstance(value, Mapping):
        return False
    if not tail:
        return True
    if head == "elicitation" and tail == "form" and not value:
        return True  # a bare ``elicitation: {}`` means form mode (spec 2025-11-25 client/elicitation)
    return isinstance(value.get(tail), Mapping)  # pyright: ignore[reportUnknownMemberType]


def capability_object(names: Iterable[str]) -> dict[str, Any]:
    """The ``requiredCapabilities`` object naming ``names``: ``["elicitation.url", "sampling"]``
    gives ``{"elicitation": {"url": {}}, "sampling": {}}``."""
    missing: dict[str, Any] = {}
    for name in names:
        head, _, tail = name.partition(".")
        missing.setdefault(head, {})
        if tail:
            missing[head][tail] = {}
    return missing


class ClientView:
    """What the client declared: ``ctx.client.can("sampling")``, ``can("elicitation.url")``.

    Names: ``elicitation`` (any mode), ``elicitation.form``, ``elicitation.url``, ``sampling``,
    ``sampling.tools``, ``sampling.context``, ``roots``, ``roots.listChanged`` is not a
    capability object and reads False; extension ids work as ``extensions`` sub-keys via
    :meth:`has_extension` and :meth:`extension`. Also ``info``, ``capabilities`` (copies),
    ``user`` (the ``openai/*`` hints of ``_meta``) and ``supports_views`` (MCP Apps).

    Every value is self-reported by the client, a hint to shape a response with, never
    authentication or authorization (``ctx.auth`` is the verified principal).
    """

    __slots__ = ("_capabilities", "_info", "_meta")

    def __init__(
        self, capabilities: Mapping[str, Any] | None, info: Mapping[str, Any] | None, meta: Mapping[str, Any] | None = None
    ) -> None:
        self._capabilities = capabilities
        self._info = info
        self._meta = meta

    def can(self, name: str) -> bool:
        """True when the client declared capability ``name`` for this request."""
        return _capability_present(self._capabilities, name)

    def has_extension(self, identifier: str) -> bool:
        """True when ``capabilities.extensions`` lists ``identifier``."""
        extensions = (self._capabilities or {}).get("extensions")
        return isinstance(extensions, Mapping) and identifier in extensions

    def require(self, *names: str) -> None:
        """Raise unless every capability in ``names`` was declared.

        Raises:
            MissingCapabilityError: ``-32021`` with ``data.requiredCapabilities`` (an object).
        """
        missing = [name for name in names if not self.can(name)]
        if missing:
            raise MissingCapabilityError(capability_object(missing))

    @property
    def capabilities(self) -> dict[str, Any] | None:
        """A copy of the declared ``ClientCapabilities``, or None when unknown (a 2025 request
        served without a session)."""
        return copy.deepcopy(dict(self._capabilities)) if self._capabilities is not None else None

    @property
    def info(self) -> dict[str, Any] | None:
        """A copy of the client's ``Implementation`` (``name``, ``version``…), or None."""
        return copy.deepcopy(dict(self._info)) if self._info is not None else None

    def extension(self, identifier: str) -> dict[str, Any] | None:
        """A copy of the settings the client declared for extension ``identifier``
        (``capabilities.extensions[identifier]``), or None when it declared none."""
        return extension_settings(self._capabilities, identifier)

    @property
    def user(self) -> ClientUser | None:
        """The normalised ``openai/*`` caller hints of this request's ``_meta`` (locale, user
        agent, location, subject, conversation, organization), None when none is valid
        (``fastapi_mcp_ctx._context.client_view``). Self-reported: never proof of who the caller is."""
        return read_user(self._meta)

    @property
    def supports_views(self) -> bool:
        """True when the client declares the ``io.modelcontextprotocol/ui`` extension with
        ``text/html;profile=mcp-app`` among its ``mimeTypes`` (it renders MCP Apps views)."""
        return supports_views(self._capabilities)
