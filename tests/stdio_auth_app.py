"""docs/examples/stdio/orders.py with a dependency override, for tests/test_stdio_headers.py.

``app.dependency_overrides[key_owners]`` replaces the app's key table: over stdio it must reach
``authenticate=`` (which depends on it) as it does over HTTP. Needs docs/examples/stdio on
``PYTHONPATH`` (the test sets it).
"""

from __future__ import annotations

from orders import app, key_owners

__all__ = ["app"]


def test_owners() -> dict[str, str]:
    return {"override-key": "initech"}


app.dependency_overrides[key_owners] = test_owners
