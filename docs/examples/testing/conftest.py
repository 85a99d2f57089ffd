"""Fixtures shared by every test of the notes app."""

from collections.abc import AsyncIterator, Iterator

import pytest

from fastapi_mcp_ctx.testing import Era, McpTestClient, reset_state
from notes import app, mcp_router

ADA = {"X-API-Key": "key-ada"}


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> Era:
    """Run each test that uses it in both protocol eras."""
    return request.param


@pytest.fixture
async def client(era: Era) -> AsyncIterator[McpTestClient]:
    """A client authenticated as ada, with the app's lifespan running and info logs on."""
    async with McpTestClient(app, era=era, headers=ADA, lifespan=True, log_level="info") as client:
        yield client


@pytest.fixture(autouse=True)
async def clean_state() -> AsyncIterator[None]:
    """ctx.state lives as long as the router: empty it after every test."""
    yield
    await reset_state(mcp_router)


@pytest.fixture(autouse=True)
def clean_overrides() -> Iterator[None]:
    """No dependency override leaks into the next test."""
    yield
    app.dependency_overrides.clear()
