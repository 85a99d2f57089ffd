"""The protocol revisions the package keeps in ``_wire/versions.py`` (``import mcp_types.version``
would run ``mcp_types/__init__``, which tests/test_idle_imports.py keeps unloaded) must stay
``mcp_types.version``'s.
"""

from __future__ import annotations

import mcp_types.version as upstream
import pytest

from fastapi_mcp_ctx._wire import versions


@pytest.mark.parametrize(
    "name", ["KNOWN_PROTOCOL_VERSIONS", "HANDSHAKE_PROTOCOL_VERSIONS", "MODERN_PROTOCOL_VERSIONS", "LATEST_HANDSHAKE_VERSION"]
)
def test_the_package_versions_are_mcp_types_versions(name: str) -> None:
    assert getattr(versions, name) == getattr(upstream, name)


def test_is_version_at_least_answers_as_mcp_types_does() -> None:
    for version in [*upstream.KNOWN_PROTOCOL_VERSIONS, "zzz", ""]:
        for minimum in upstream.KNOWN_PROTOCOL_VERSIONS:
            assert versions.is_version_at_least(version, minimum) is upstream.is_version_at_least(version, minimum)
    with pytest.raises(ValueError, match="minimum must be a known protocol version, got 'zzz'"):
        versions.is_version_at_least("2025-11-25", "zzz")
