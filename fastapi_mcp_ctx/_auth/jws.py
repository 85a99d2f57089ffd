"""One bearer JWT read once: a compact JWS (RFC 7515 §7.1) bounded, decoded and parsed a single time.

:func:`read_compact` refuses a token longer than ``MCP_JWT_MAX_TOKEN_BYTES`` before touching it,
checks the whole token against the compact grammar (three base64url segments, ASCII only) in one
linear pass, then base64url-decodes each segment once and parses the header and the payload once
(JSON objects both). Nothing else decodes the token: the signature is checked on the signing input
and signature bytes kept here, and the claims (:func:`check_claims`) on the payload parsed here, so
an attacker's large token costs one pass over at most the bound (issue 24 item 3: pyjwt's own
``decode`` after ``get_unverified_header`` and an unverified ``decode`` parsed a 4 MB token three
times before its signature was looked at).

A ``crit`` header is refused (RFC 7515 §4.1.11: a recipient that understands none of the listed
extensions must reject the token; this one understands none, so ``b64: false`` detached payloads,
RFC 7797, are refused too).

:class:`TokenRefusal` says what is wrong: ``cause`` for the server log (debug), and
``description`` for the wire only when it is the token's shape and no secret.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["NUMERIC_DATE_CLAIMS", "CompactJws", "TokenRefusal", "check_claims", "read_compact"]

NUMERIC_DATE_CLAIMS: Final = ("exp", "nbf", "iat")
REQUIRED_CLAIMS: Final = ("exp", "iss", "aud", "sub")
_COMPACT: Final = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


class TokenRefusal(Exception):
    """A token that cannot be accepted.

    Attributes:
        cause: what is wrong, for the server log at debug level (never the token).
        description: the RFC 6750 ``error_description`` to send, or None (a generic refusal).
    """

    def __init__(self, cause: str, description: str | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.description = description


@dataclass(frozen=True, slots=True)
class CompactJws:
    """A compact JWS as read once.

    Attributes:
        header: the protected header (a JSON object).
        claims: the payload (a JSON object).
        signing_input: ``BASE64URL(header) "." BASE64URL(payload)``, the bytes the signature covers.
        signature: the decoded signature bytes.
    """

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


def _segment(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value: Any = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise TokenRefusal(f"unreadable {what}: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise TokenRefusal(f"the {what} is not a JSON object")
    return value  # pyright: ignore[reportUnknownVariableType]


def _json_kind(value: Any) -> str:
    """How a JSON value that is not a number reads in an error: ``a string``, ``null``..."""
    kinds = ((bool, "a boolean"), (str, "a string"), (list, "an array"), (dict, "an object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def _check_numeric_dates(claims: dict[str, Any]) -> None:
    """``exp`` / ``nbf`` / ``iat``, when present, are finite JSON numbers (RFC 7519 §2 NumericDate)."""
    for name in NUMERIC_DATE_CLAIMS:
        if name not in claims:
            continue
        value = claims[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            kind = _json_kind(value)
            raise TokenRefusal(f"{name} is {kind}", f"the {name} claim must be a JSON number (RFC 7519 NumericDate) but is {kind}")
        if isinstance(value, float) and not math.isfinite(value):
            raise TokenRefusal(f"{name} is {value}", f"the {name} claim must be a finite JSON number (RFC 7519 NumericDate)")


def read_compact(token: str, max_bytes: int) -> CompactJws:
    """Bound, decode and parse ``token`` once (module docstring); the numeric dates are checked
    here too, since they are the token's shape.

    Raises:
        TokenRefusal: longer than ``max_bytes`` (before any decoding), not a compact JWS, a
            header or payload that is not a JSON object, a ``crit`` header, an ``exp`` / ``nbf``
            / ``iat`` that is not a finite number (the last two named in ``description``).
    """
    if len(token) > max_bytes:
        raise TokenRefusal(
            f"a token of {len(token)} bytes, over MCP_JWT_MAX_TOKEN_BYTES={max_bytes}",
            f"the token is longer than {max_bytes} bytes",
        )
    if _COMPACT.fullmatch(token) is None:
        raise TokenRefusal("not a compact JWS (three base64url segments)")
    head, body, signature = token.split(".")
    try:
        header_bytes, payload_bytes, signature_bytes = _segment(head), _segment(body), _segment(signature)
    except (binascii.Error, ValueError):
        raise TokenRefusal("a segment is not base64url") from None
    header = _json_object(header_bytes, "header")
    if "crit" in header:
        raise TokenRefusal("a crit header (no critical extension is understood, RFC 7515 §4.1.11)")
    claims = _json_object(payload_bytes, "payload")
    _check_numeric_dates(claims)
    return CompactJws(header, claims, f"{head}.{body}".encode("ascii"), signature_bytes)


def check_claims(claims: dict[str, Any], *, now: float, leeway: float, issuer: str, audiences: list[str]) -> None:
    """The registered claims of a token whose signature verified (RFC 7519 §4.1), as pyjwt checks
    them: ``exp`` / ``iss`` / ``aud`` / ``sub`` required (not null), ``exp`` in the future and
    ``nbf`` / ``iat`` not (each within ``leeway`` seconds of ``now``, epoch seconds), ``iss``
    exactly ``issuer``, ``aud`` (a string or a list of strings) naming one of ``audiences``,
    ``sub`` and ``jti`` strings.

    Raises:
        TokenRefusal: the first claim that fails (``cause`` only: the wire stays generic).
    """
    for name in REQUIRED_CLAIMS:
        if claims.get(name) is None:
            raise TokenRefusal(f"the {name} claim is missing")
    if claims["exp"] <= now - leeway:
        raise TokenRefusal("expired")
    if "nbf" in claims and claims["nbf"] > now + leeway:
        raise TokenRefusal("not yet valid (nbf)")
    if "iat" in claims and claims["iat"] > now + leeway:
        raise TokenRefusal("issued in the future (iat)")
    if claims["iss"] != issuer:
        raise TokenRefusal("another issuer")
    aud: Any = claims["aud"]
    named: list[Any] = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else [None]  # pyright: ignore[reportUnknownVariableType]
    if any(not isinstance(value, str) for value in named):
        raise TokenRefusal("aud is neither a string nor a list of strings")
    if not any(value in audiences for value in named):
        raise TokenRefusal("issued for another audience")
    if not isinstance(claims["sub"], str):
        raise TokenRefusal("sub is not a string")
    if "jti" in claims and not isinstance(claims["jti"], str):
        raise TokenRefusal("jti is not a string")
