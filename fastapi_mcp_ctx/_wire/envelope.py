"""Era routing and the 2026-07-28 per-request envelope: pure functions, no I/O.

``choose_era`` implements DESIGN.md decision 2 (checklist §5): a request is served in the
modern (2026-07-28) era when the ``MCP-Protocol-Version`` header names a non-handshake
version, or when the header is absent, there is no ``Mcp-Session-Id`` and
``params._meta`` carries ``io.modelcontextprotocol/protocolVersion``; otherwise in the
handshake (2025) era. A version the server does not know at all is the modern era's
``-32022`` without a session id, and a 2025 request (400, :func:`check_legacy_version`) with one.

``read_modern_envelope`` runs the modern validation ladder (checklist §4.5 steps 8-11):
duplicate headers → ``-32020``; ``_meta`` object with both required keys → ``-32602``;
header rung (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` equal to the body) →
``-32020``; version served → ``-32022``. Spec: 2026-07-28
``basic/transports/streamable-http`` §Server Validation and ``basic/index`` §_meta.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NoReturn

from ..errors import HeaderMismatchError, InvalidParamsError, UnsupportedVersionError, UnsupportedVersionHeaderError
from .memo import BoundedMemo, HeaderNames
from .trace_context import TRACE_KEYS, read_trace
from .versions import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

__all__ = [
    "LOG_LEVELS",
    "META_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_VERSION",
    "NAME_MEMBER",
    "Era",
    "HeaderMap",
    "RequestEnvelope",
    "check_legacy_version",
    "choose_era",
    "decode_header_value",
    "encode_header_value",
    "header_map",
    "read_legacy_envelope",
    "read_modern_envelope",
]

Era = Literal["legacy", "modern"]

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"

LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""RFC 5424 levels in ascending severity (spec ``server/utilities/logging``)."""

# Methods whose target is named by the Mcp-Name header, and the params member it mirrors.
NAME_MEMBER: Final[dict[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",  # tasks extension (SEP-2663) §Streamable HTTP: Routing Headers
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
NAME_OPTIONAL: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
"""Methods whose ``Mcp-Name`` is checked when sent but tolerated when missing: the tasks
extension's routing header, which the official ``mcp`` client (2.3.0, under FastMCP's task
client) does not send yet."""

_SENTINEL: Final = re.compile(r"^=\?base64\?(.*)\?=\Z", re.DOTALL)
_HEADER_VALUE: Final = re.compile(r"^[\x20-\x7e]*\Z")
_PLAIN_VALUE: Final = re.compile(r"^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?\Z")


class HeaderMap(dict[str, str]):
    """Request headers read once: lower-cased name → value (the last one when repeated).

    ``repeated`` holds the names that appeared more than once (an empty frozenset, shared, when
    none did: :func:`header_map` gives a map its own set only then).
    """

    repeated: AbstractSet[str] = frozenset()


_NAMES: Final = HeaderNames(256)  # a client sends the same few header names on every request


def header_map(raw: Iterable[tuple[bytes, bytes]]) -> HeaderMap:
    """Build a :class:`HeaderMap` from ASGI ``scope["headers"]`` (latin-1, as HTTP defines)."""
    pairs = raw if isinstance(raw, (list, tuple)) else list(raw)
    names = _NAMES
    headers = HeaderMap()
    try:  # filled in place: a comprehension would add a frame and a dict to copy
        for key, value in pairs:
            headers[names[key]] = value.decode("latin-1")
    except TypeError:  # a name that is not hashable (a bytearray): decoded one by one
        headers = HeaderMap({key.decode("latin-1").lower(): value.decode("latin-1") for key, value in pairs})
    if len(headers) != len(pairs):  # a name appeared twice (rare)
        headers.repeated = _repeated_names(pairs)
    return headers


def _repeated_names(pairs: Iterable[tuple[bytes, bytes]]) -> set[str]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for key, _ in pairs:
        name = key.decode("latin-1").lower()
        if name in seen:
            repeated.add(name)
        seen.add(name)
    return repeated


@dataclass(slots=True)
class RequestEnvelope:
    """What the request says about itself, in either era.

    Attributes:
        era: ``"legacy"`` (2025 handshake) or ``"modern"`` (2026-07-28).
        protocol_version: the negotiated (legacy) or declared (modern) revision.
        client_capabilities: ``ClientCapabilities`` as a dict (modern: this request's; legacy:
            the session's from ``initialize``), or None when unknown.
        client_info: ``Implementation`` dict or None.
        log_level: minimum ``notifications/message`` level the client opted into, or None.
        progress_token: ``params._meta.progressToken`` (str or int, ``0`` included) or None.
        trace: W3C ``traceparent`` / ``tracestate`` / ``baggage`` found in headers or ``_meta``
            (:mod:`~fastapi_mcp_ctx._wire.trace_context`).
        meta: ``params._meta`` as sent (an object), or None (``ctx.client.user`` reads it).
    """

    era: Era
    protocol_version: str
    client_capabilities: dict[str, Any] | None = None
    client_info: dict[str, Any] | None = None
    log_level: str | None = None
    progress_token: str | int | None = None
    trace: dict[str, str] = field(default_factory=lambda: {})
    meta: dict[str, Any] | None = None


def choose_era(headers: HeaderMap, params: dict[str, Any] | None) -> Era:
    """Decide the era of one POST (DESIGN.md decision 2).

    Args:
        headers: the HTTP request headers.
        params: the JSON-RPC ``params`` object, or None for a GET/DELETE.
    Returns:
        ``"modern"`` or ``"legacy"``.
    """
    version = headers.get("mcp-protocol-version")
    has_session = headers.get("mcp-session-id") is not None
    if version is not None:
        value = version.strip()
        if value in HANDSHAKE_PROTOCOL_VERSIONS:
            return "legacy"
        if value in MODERN_PROTOCOL_VERSIONS:
            return "modern"
        return "legacy" if has_session else "modern"  # unknown: a session says 2025
    if has_session or params is None:
        return "legacy"
    meta: Any = params.get("_meta")
    if isinstance(meta, dict) and META_VERSION in meta:
        return "modern"
    return "legacy"


def check_legacy_version(headers: HeaderMap) -> None:
    """A 2025-era ``MCP-Protocol-Version`` header, when present, must name a handshake version.

    Spec 2025-11-25 ``basic/transports`` §Protocol Version Header (absent: assume 2025-03-26).

    Raises:
        UnsupportedVersionHeaderError: 400, ``data.supported`` (the handshake versions) and
            ``data.requested``.
    """
    version = headers.get("mcp-protocol-version")
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS and version.strip() not in HANDSHAKE_PROTOCOL_VERSIONS:
        raise UnsupportedVersionHeaderError(version.strip()[:64], list(HANDSHAKE_PROTOCOL_VERSIONS))


def _refuse_unknown_version(headers: HeaderMap) -> None:
    """``read_modern_envelope``'s one addition to the ladder: when ``_meta`` lacks the envelope
    and the header names a version this server does not serve, the answer is ``-32022``
    (``data.supported``), not ``-32602``: without an envelope the version is the fault a client
    can act on."""
    header_version = headers.get("mcp-protocol-version")
    if header_version is not None and header_version.strip(" \t") not in MODERN_PROTOCOL_VERSIONS:
        raise UnsupportedVersionError(header_version.strip(" \t")[:64], list(MODERN_PROTOCOL_VERSIONS))


_DECODED: Final = BoundedMemo[str](256)  # a client names the same few tools on every request: remember their headers


def decode_header_value(raw: str) -> str:
    """Decode an ``Mcp-Name`` / ``Mcp-Param-*`` value: literal, or ``=?base64?<b64 utf-8>?=``.

    Values decoded once are remembered (at most 256 values of at most 256 characters; refused
    ones are judged every time).

    Raises:
        HeaderMismatchError: the sentinel holds malformed base64 (bad padding or alphabet,
            non-canonical) or bytes that are not UTF-8, or the value has control characters.
    """
    return _DECODED.get(raw, _decode_header_value)


def _decode_header_value(raw: str) -> str:
    value = raw.strip(" \t")
    match = _SENTINEL.fullmatch(value)
    if match is None:
        if not _HEADER_VALUE.fullmatch(value):
            raise HeaderMismatchError("Header value has invalid characters")
        return value
    encoded = match.group(1)
    try:
        decoded = base64.b64decode(encoded, validate=True)
        if base64.b64encode(decoded).decode("ascii") != encoded:
            raise ValueError("non-canonical base64")
        return decoded.decode("utf-8")
    except (binascii.Error, ValueError) as exc:
        raise HeaderMismatchError("Malformed base64 header value") from exc


def encode_header_value(value: str) -> str:
    """The ``Mcp-Name`` / ``Mcp-Param-*`` form of ``value`` (the inverse of :func:`decode_header_value`).

    Printable ASCII without leading or trailing whitespace is sent as is; anything else as
    ``=?base64?<base64 of the UTF-8 bytes>?=`` (2026-07-28 ``streamable-http`` §Header encoding).
    """
    if _PLAIN_VALUE.fullmatch(value) and not _SENTINEL.fullmatch(value):  # fullmatch: "$" also matches before a final "\n"
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _progress_token(meta: dict[str, Any] | None) -> str | int | None:
    if meta is None:
        return None
    if "progressToken" not in meta:
        return None
    token = meta["progressToken"]
    if isinstance(token, bool) or not isinstance(token, (str, int)):
        raise InvalidParamsError("params._meta.progressToken must be a string or an integer (schema: ProgressToken)")
    return token


def read_legacy_envelope(headers: HeaderMap, params: dict[str, Any], protocol_version: str) -> RequestEnvelope:
    """The envelope of a handshake-era request (progress token and trace from ``_meta``)."""
    raw_meta = params.get("_meta")
    if raw_meta is None:  # most calls: no _meta, so no progress token, and a trace only from headers
        traced = "traceparent" in headers or "tracestate" in headers or "baggage" in headers
        return RequestEnvelope("legacy", protocol_version, None, None, None, None, read_trace(headers, None) if traced else {})
    if not isinstance(raw_meta, dict):
        raise InvalidParamsError("params._meta must be an object (schema: RequestParams._meta)")
    meta: dict[str, Any] = raw_meta  # pyright: ignore[reportUnknownVariableType]
    return RequestEnvelope(
        era="legacy",
        protocol_version=protocol_version,
        progress_token=_progress_token(meta),
        trace=read_trace(headers, meta),
        meta=meta,
    )


def read_modern_envelope(
    headers: HeaderMap, method: str, params: dict[str, Any], *, http_headers: bool = True
) -> RequestEnvelope:
    """Validate and read a 2026-07-28 request (checklist §4.5 steps 8-11, in that order).

    ``http_headers=False`` (stdio, which has no headers) skips the header rung.

    Raises:
        HeaderMismatchError: a standard header repeated, missing, or different from the body
            (``-32020``).
        InvalidParamsError: ``params._meta`` missing, not an object, lacking a required key,
            or carrying an invalid ``logLevel`` / non-string version (``-32602``).
        UnsupportedVersionError: the declared version is not served (``-32022``).
    """
    raw_meta: Any = params.get("_meta")
    if (http_headers and headers.repeated) or not isinstance(raw_meta, dict):
        _refuse_envelope(headers, raw_meta, http_headers)  # raises, in the ladder's order (a repeated header of no MCP name: passes)
    meta: dict[str, Any] = raw_meta  # pyright: ignore[reportUnknownVariableType]
    try:
        version: Any = meta[META_VERSION]
        capabilities: Any = meta[META_CAPABILITIES]
    except KeyError:
        _refuse_envelope(headers, meta, http_headers)
        raise  # unreachable: _refuse_envelope raised
    if not isinstance(capabilities, dict):
        _refuse_capabilities()
    if http_headers:
        # most requests send each header exactly as the body says: one comparison; anything else
        # (absent, padded, different) takes the rung's full check
        if headers.get("mcp-protocol-version") != version:
            _check_mirror(headers, "mcp-protocol-version", version, "MCP-Protocol-Version", "the request envelope's protocol version")
        if headers.get("mcp-method") != method:
            _check_mirror(headers, "mcp-method", method, "Mcp-Method", "the request body's method")
        member = NAME_MEMBER.get(method)
        if member is not None:
            header_name = headers.get("mcp-name")
            if header_name is None or _DECODED.get(header_name, _decode_header_value) != params.get(member):
                _refuse_name(header_name, method, member)
    if version not in MODERN_PROTOCOL_VERSIONS:  # a str: the versions are; anything else is judged below
        _refuse_version(version)
    usual = len(meta) == 3 and META_CLIENT_INFO in meta  # version, capabilities, clientInfo: no logLevel, no progressToken
    log_level = None if usual else _log_level(meta)
    client_info = meta.get(META_CLIENT_INFO)
    if client_info is not None and not (isinstance(client_info, dict) and isinstance(client_info.get("name"), str)):  # pyright: ignore[reportUnknownMemberType]
        _refuse_client_info()
    progress_token = None if usual else _progress_token(meta)
    return RequestEnvelope(
        "modern",
        version,
        capabilities,  # pyright: ignore[reportUnknownArgumentType]
        client_info,  # pyright: ignore[reportUnknownArgumentType]
        log_level,
        progress_token,
        {} if TRACE_KEYS.isdisjoint(headers) and TRACE_KEYS.isdisjoint(meta) else read_trace(headers, meta),  # pyright: ignore[reportUnknownArgumentType]
        meta,  # pyright: ignore[reportUnknownArgumentType]
    )


def _refuse_capabilities() -> NoReturn:
    raise InvalidParamsError(f"params._meta['{META_CAPABILITIES}'] must be an object")


def _refuse_version(version: Any) -> NoReturn:
    if not isinstance(version, str):
        raise InvalidParamsError(f"params._meta['{META_VERSION}'] must be a string")
    raise UnsupportedVersionError(version, list(MODERN_PROTOCOL_VERSIONS))


def _log_level(meta: dict[str, Any]) -> Any:
    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise InvalidParamsError(f"Invalid {META_LOG_LEVEL}: expected one of {', '.join(LOG_LEVELS)}")
    return log_level


def _refuse_client_info() -> NoReturn:
    raise InvalidParamsError(f"params._meta['{META_CLIENT_INFO}'] must be an object with a string 'name' (schema: Implementation)")


def _refuse_envelope(headers: HeaderMap, meta: Any, http_headers: bool) -> None:
    """The ladder's first rungs, for a request that fails one: a standard header repeated
    (``-32020``), then ``_meta`` not an object or lacking a required key (``-32602``, or
    ``-32022`` when the header names a version this server does not serve)."""
    if http_headers and headers.repeated:
        for name in ("mcp-protocol-version", "mcp-method", "mcp-name"):
            if name in headers.repeated:
                raise HeaderMismatchError(f"{name} header appears more than once")
    if not isinstance(meta, dict):
        _refuse_unknown_version(headers)
        raise InvalidParamsError(
            "params._meta must be an object carrying the required "
            f"'{META_VERSION}' and '{META_CAPABILITIES}' envelope keys"
        )
    missing = [key for key in (META_VERSION, META_CAPABILITIES) if key not in meta]
    if missing:
        _refuse_unknown_version(headers)
        raise InvalidParamsError(f"params._meta is missing the required envelope key(s): {', '.join(missing)}")


def _check_mirror(headers: HeaderMap, name: str, body_value: Any, title: str, what: str) -> None:
    """A standard header must be present and equal (after optional whitespace) to the body's value."""
    value = headers.get(name)
    if value is None:
        raise HeaderMismatchError(f"Missing {title} header")
    if value.strip(" \t") != body_value:
        raise HeaderMismatchError(f"{name} header does not match {what}")


def _refuse_name(header_name: str | None, method: str, member: str) -> None:
    """``Mcp-Name`` is missing or its decoded value (:func:`decode_header_value`) differs from
    ``params.<member>``: refused, unless it is missing for a method of :data:`NAME_OPTIONAL`."""
    if header_name is None:
        if method not in NAME_OPTIONAL:
            raise HeaderMismatchError(f"Missing Mcp-Name header (it mirrors params.{member})")
    else:
        raise HeaderMismatchError(f"mcp-name header does not match the request body's '{member}' parameter")
