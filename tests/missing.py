"""Simulate an extra that is not installed: hide a module (and its submodules) from import."""

from __future__ import annotations

import sys

import pytest


def hide(monkeypatch: pytest.MonkeyPatch, module: str, *reimported: str) -> None:
    """Make ``import module`` (and its submodules) fail as if it were not installed, and forget
    our modules that imported it (``reimported``), so they import it again. Undone by
    ``monkeypatch`` at the end of the test."""
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")] or [module]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in reimported:
        monkeypatch.delitem(sys.modules, name, raising=False)
