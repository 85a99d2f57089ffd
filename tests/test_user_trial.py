"""Faults a new user's first trial hit: each refusal or error names what to change."""

from __future__ import annotations

import logging

import pytest
from conftest import make_router, open_client, rpc
from fastapi import FastAPI

from fastapi_mcp_ctx._stdio.serve import _choose  # pyright: ignore[reportPrivateUsage]
from fastapi_mcp_ctx.errors import AppLoadError, ConfigurationError
from fastapi_mcp_ctx.testing import McpTestClient

# -- 1. app.mount("/mcp", mcp_router) -------------------------------------------------------


def _mounted_app() -> FastAPI:
    router = make_router()

    @router.tool
    async def add(a: int) -> int:
        """Return ``a``."""
        return a

    app = FastAPI()
    app.mount("/mcp", router)
    return app


async def test_a_mounted_router_answers_every_request_with_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    """A client posting to the mount (at /mcp or /mcp/mcp) gets HTTP 500 naming include_router, and
    one ERROR line is logged per request."""
    app = _mounted_app()
    async with open_client(app) as client:
        for path in ("/mcp/", "/mcp/mcp"):
            caplog.clear()
            with caplog.at_level(logging.ERROR, logger="fastapi_mcp_ctx"):
                response = await client.post(path, json=rpc("tools/list"), headers={"Accept": "application/json, text/event-stream"})
            assert response.status_code == 500, path
            message = response.json()["error"]["message"]
            assert "app.include_router(mcp_router)" in message and "app.mount(" in message
            errors = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert len(errors) == 1 and "app.include_router(mcp_router)" in errors[0].getMessage()


def test_the_test_client_and_stdio_refuse_a_mounted_router() -> None:
    """McpTestClient and the stdio/serve discovery no longer find a router reached only through a Mount."""
    app = _mounted_app()
    with pytest.raises(ConfigurationError, match=r"app\.include_router\(mcp_router\) instead of app\.mount"):
        McpTestClient(app)
    with pytest.raises(AppLoadError, match=r"app\.include_router\(mcp_router\) instead of app\.mount"):
        _choose(app, "m:app", None)
    included = make_router()
    fine = FastAPI()
    fine.include_router(included)
    fine.mount("/again", included)  # also included: the included endpoint serves
    assert McpTestClient(fine).path == "/mcp"
