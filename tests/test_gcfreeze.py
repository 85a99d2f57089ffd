"""``MCP_GC_FREEZE`` (``_server/gcfreeze.py``): the start-up objects move to the permanent generation at
the router's first request, once per process; off by default."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from conftest import LEGACY, Wire, mcp_settings, open_client
from notify_app import build

from fastapi_mcp_ctx._server import gcfreeze as _gcfreeze
from fastapi_mcp_ctx._server.gcfreeze import freeze_startup_objects


@pytest.fixture
def unfrozen(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    gc.unfreeze()
    monkeypatch.setattr(_gcfreeze, "_frozen_in", [])
    yield
    gc.unfreeze()  # the rest of the suite runs as before


def test_the_setting_is_off_by_default_and_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi_mcp_ctx import McpSettings

    assert McpSettings().gc_freeze is False
    monkeypatch.setenv("MCP_GC_FREEZE", "1")
    assert McpSettings().gc_freeze is True


async def test_the_first_request_freezes_once_when_enabled(unfrozen: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = gc.freeze

    def counted() -> None:
        calls.append(gc.get_count()[0])
        real()

    monkeypatch.setattr(gc, "freeze", counted)
    app, _ = build(settings=mcp_settings(gc_freeze=True))
    assert gc.get_freeze_count() == 0
    async with open_client(app) as client:
        await Wire(client).initialize(LEGACY)
        assert gc.get_freeze_count() > 1000  # the application's modules, models and tools
        await Wire(client).initialize(LEGACY)
    assert len(calls) == 1  # once per process
    assert freeze_startup_objects() is False and len(calls) == 1


async def test_nothing_is_frozen_when_disabled(unfrozen: None) -> None:
    app, _ = build(settings=mcp_settings(gc_freeze=False))
    async with open_client(app) as client:
        await Wire(client).initialize(LEGACY)
    assert gc.get_freeze_count() == 0
