"""The protocol revisions the server speaks: ``mcp_types.version``'s values, held here.

``import mcp_types.version`` runs ``mcp_types/__init__``, which builds every pydantic model
of the protocol (~3.5 MB of a server's idle RSS); serving a call needs none of them, so the
package imports ``mcp_types`` only where a model is used (``tests/test_lazy_mcp_types.py``
checks both: these values equal ``mcp_types.version``'s, and an app built on the public API
does not import ``mcp_types``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "KNOWN_PROTOCOL_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "MODERN_PROTOCOL_VERSIONS",
    "is_version_at_least",
]

KNOWN_PROTOCOL_VERSIONS: Final[tuple[str, ...]] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
"""Every released protocol revision, oldest to newest."""
HANDSHAKE_PROTOCOL_VERSIONS: Final[tuple[str, ...]] = KNOWN_PROTOCOL_VERSIONS[:4]
"""The revisions reached through the ``initialize`` handshake."""
MODERN_PROTOCOL_VERSIONS: Final[tuple[str, ...]] = ("2026-07-28",)
"""The revisions of the stateless per-request envelope."""
LATEST_HANDSHAKE_VERSION: Final[str] = HANDSHAKE_PROTOCOL_VERSIONS[-1]
"""The newest handshake revision."""


def is_version_at_least(version: str, minimum: str) -> bool:
    """``mcp_types.version.is_version_at_least``: ``version`` is a known revision at least as new as ``minimum``.

    Raises:
        ValueError: ``minimum`` is not a known revision.
    """
    if minimum not in KNOWN_PROTOCOL_VERSIONS:
        raise ValueError(f"minimum must be a known protocol version, got {minimum!r}")
    if version not in KNOWN_PROTOCOL_VERSIONS:
        return False
    return KNOWN_PROTOCOL_VERSIONS.index(version) >= KNOWN_PROTOCOL_VERSIONS.index(minimum)
