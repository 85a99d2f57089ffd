"""Transport security: ``Host`` / ``Origin`` allow-lists against DNS rebinding.

Spec 2025-11-25 ``basic/transports`` §Security Warning (same in 2026-07-28): servers MUST
validate ``Origin`` and answer an invalid one with 403; a ``Host`` outside the allow-list
gets 421 Misdirected Request. An absent ``Origin`` (non-browser clients) is allowed.

Patterns: ``"127.0.0.1:8000"`` (exact), ``"localhost:*"`` (any port, or none),
``"http://localhost:*"`` for origins. Matching is case-insensitive.

A refusal says what to set: the 421 names ``MCP_ALLOWED_HOSTS`` (the 403 ``MCP_ALLOWED_ORIGINS``),
and the server log names each refused ``Host`` once (at most 64 of them), with the setting that
admits it: behind a reverse proxy on the same machine every call comes from loopback with the
public ``Host``.

Loopback is the whole family, not three names: any ``127.0.0.0/8`` address, ``::1`` and the
IPv4-mapped ``::ffff:127.x.y.z`` (:func:`is_loopback_host`); the default allow-lists admit a
``Host`` / ``Origin`` naming any of them.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from ..errors import HostNotAllowedError, OriginNotAllowedError

__all__ = ["LOOPBACK_HOSTS", "TransportSecurity", "is_loopback_host", "loopback_security"]

_PORT: Final = re.compile(r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])")
LOOPBACK_HOSTS: Final[frozenset[str]] = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_REPORTED_HOSTS: set[str] = set()
logger = logging.getLogger("fastapi_mcp_ctx")


@lru_cache(maxsize=1024)  # asked once per request with the server's own address: a handful of values
def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or IP literal, optionally ``[v6]``) is loopback.

    ``localhost``, any ``127.0.0.0/8`` address, ``::1`` and IPv4-mapped ``::ffff:127.x.y.z``.
    """
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _loopback_authority(authority: str) -> bool:
    """``host[:port]`` (``[v6][:port]``) naming a loopback IP literal (not a name)."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return False
        host, rest = authority[: end + 1], authority[end + 1 :]
    else:
        host, sep, port = authority.partition(":")
        rest = sep + port
    if rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:])):
        return False
    literal = host[1:-1] if host.startswith("[") else host
    try:  # the canonical spelling only (127.0.0.2, [::1]), not 127.1 or [0:0:0:0:0:0:0:1]
        address = ipaddress.ip_address(literal)
    except ValueError:
        return False
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    canonical = literal in (str(address), f"::ffff:{mapped}")
    return canonical and host.startswith("[") == (":" in literal) and is_loopback_host(host)


def _loopback_origin(origin: str) -> bool:
    for scheme in ("http://", "https://"):
        if origin.startswith(scheme):
            return _loopback_authority(origin[len(scheme) :])
    return False


def _report_refused_host(host: str | None) -> None:
    name = (host or "")[:256]
    if name in _REPORTED_HOSTS or len(_REPORTED_HOSTS) >= 64:
        return
    _REPORTED_HOSTS.add(name)
    logger.warning(
        "refused Host %r (421, DNS-rebinding protection): if this server is reached under that name "
        "(a reverse proxy), set MCP_ALLOWED_HOSTS='[\"%s\"]'",
        name,
        name,
    )


def _matches(value: str, patterns: tuple[str, ...]) -> bool:
    value = value.lower()
    for pattern in patterns:
        if pattern.endswith(":*"):
            base = pattern[:-2]
            if value == base:
                return True
            if value.startswith(base + ":") and _PORT.fullmatch(value[len(base) + 1 :]):
                return True
        elif value == pattern:
            return True
    return False


@dataclass(frozen=True, slots=True)
class TransportSecurity:
    """Host / Origin allow-lists; ``enabled=False`` admits everything.

    Raises (from :meth:`check`):
        HostNotAllowedError: ``Host`` absent or outside ``allowed_hosts`` (HTTP 421).
        OriginNotAllowedError: ``Origin`` present and outside ``allowed_origins`` (HTTP 403).
    """

    enabled: bool
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    any_loopback_ip: bool = False
    """Also admit a ``Host`` / ``Origin`` naming any loopback IP literal (127.x, ::1, ::ffff:127.x)."""

    admitted: dict[tuple[str | None, str | None], bool] = field(default_factory=lambda: {}, compare=False, repr=False)
    """``(Host, Origin)`` pairs already admitted (at most 64; a refusal is judged every time)."""

    def check(self, headers: Mapping[str, str]) -> None:
        """Validate one request's headers; returns None when allowed."""
        if not self.enabled:
            return
        host = headers.get("host")
        origin = headers.get("origin")
        pair = (host, origin)
        if pair in self.admitted:
            return
        self._judge(host, origin)
        if len(self.admitted) < 64:
            self.admitted[pair] = True

    def _judge(self, host: str | None, origin: str | None) -> None:
        if host is None or not (
            _matches(host, self.allowed_hosts) or (self.any_loopback_ip and _loopback_authority(host.lower()))
        ):
            _report_refused_host(host)
            raise HostNotAllowedError()
        if origin is not None and not (
            _matches(origin, self.allowed_origins) or (self.any_loopback_ip and _loopback_origin(origin.lower()))
        ):
            raise OriginNotAllowedError()


def loopback_security(extra_hosts: list[str] | None = None, extra_origins: list[str] | None = None) -> TransportSecurity:
    """The default for loopback binds: localhost and any loopback IP (127.x, [::1], [::ffff:127.x]), any port.

    Args:
        extra_hosts / extra_origins: more allowed patterns (see module docstring).
    """
    hosts = ("127.0.0.1:*", "localhost:*", "[::1]:*", *(h.lower() for h in extra_hosts or ()))
    origins = (
        "http://127.0.0.1:*",
        "http://localhost:*",
        "http://[::1]:*",
        "https://127.0.0.1:*",
        "https://localhost:*",
        "https://[::1]:*",
        *(o.lower() for o in extra_origins or ()),
    )
    return TransportSecurity(enabled=True, allowed_hosts=hosts, allowed_origins=origins, any_loopback_ip=True)
