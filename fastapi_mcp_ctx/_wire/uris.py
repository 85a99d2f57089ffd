"""One resource URI, one form: :func:`normalize_uri` (RFC 3986 §6.2.2).

Everything that compares resource URIs compares their normal forms: the static resource lookup
(and with it the resource's scope check), 2025 ``resources/subscribe``, 2026 listen filters and
``notify_resource_updated``. So ``docs://%70ayroll`` and ``DOCS://Payroll`` are the static
``docs://payroll`` (and need its scopes; issue 24 item 9), not a template's match.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["normalize_uri"]

_ESCAPE: Final = re.compile(r"%([0-9A-Fa-f]{2})")
_ESCAPE_SPLIT: Final = re.compile(r"(%[0-9A-F]{2})")
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SCHEME_AUTHORITY: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(?://([^/?#]*))?")


def _fix_escape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


def _lower_host(host: str) -> str:
    if "%" not in host:
        return host.lower()
    return "".join(part if part.startswith("%") else part.lower() for part in _ESCAPE_SPLIT.split(host))


def normalize_uri(uri: str) -> str:
    """``uri`` in its syntax-based normal form (RFC 3986 §6.2.2.1-2): an escaped unreserved
    character is decoded (``%31`` is ``1``), other escapes get upper-case hex, and the scheme and
    the authority's host are lower-cased (the userinfo, path, query and fragment keep their case).
    Forms only the application can equate (``books/01`` and ``books/1``, a trailing slash) stay
    distinct. Pure; a string that is not a URI comes back with only its escapes normalised."""
    if "%" in uri:
        uri = _ESCAPE.sub(_fix_escape, uri)
    match = _SCHEME_AUTHORITY.match(uri)
    if match is None:
        return uri
    scheme, authority = match.group(1), match.group(2)
    if authority is None:
        return uri if scheme.islower() else scheme.lower() + uri[match.end(1) :]
    userinfo, at, host = authority.rpartition("@")
    normal = f"{scheme.lower()}://{userinfo}{at}{_lower_host(host)}"
    return uri if normal == uri[: match.end()] else normal + uri[match.end() :]
