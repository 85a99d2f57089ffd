"""What one ``tools/call`` costs beyond the tool: no worker thread nobody asked for.

FastAPI runs a plain ``def`` dependency in its thread pool; a thread hop per call for the
``Context`` lookup cost the dependency benchmark half its throughput and, at 32 concurrent
calls, a p99 of 60 ms (GIL hand-offs between the loop and the pool). bench/README.md
``## Profile of the d workload`` has the figures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio.to_thread
import pytest
from conftest import Wire, make_app, make_router, result_of
from fastapi import Depends, FastAPI, Header

from fastapi_mcp_ctx import Context, mcp_context

EVENTS: list[str] = []


async def get_db() -> AsyncIterator[dict[str, str]]:
    EVENTS.append("db open")
    try:
        yield {"k1": "v1"}
    finally:
        EVENTS.append("db closed")


def sync_dependency() -> str:
    return "from a thread"


@pytest.fixture
def app() -> FastAPI:
    router = make_router()

    @router.tool()
    async def lookup(
        key: str,
        db: dict[str, str] = Depends(get_db),
        x_tenant: str = Header(),
        ctx: Context = Depends(mcp_context),
    ) -> dict[str, str]:
        """The benchmark's d tool: a yield dependency, a header, the Context."""
        return {"value": db[key], "tenant": x_tenant, "request_id": str(ctx.request_id)}

    @router.tool()
    async def progress(ctx: Context = Depends(mcp_context)) -> str:
        """Only the Context."""
        return f"id {ctx.request_id}"

    @router.tool()
    async def threaded(value: str = Depends(sync_dependency)) -> str:
        """A plain def dependency: FastAPI runs it in the thread pool, as on a path operation."""
        return value

    return make_app(router)


@pytest.fixture
def thread_hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of the callables sent to anyio's worker threads (FastAPI's run_in_threadpool goes there)."""
    hops: list[str] = []
    real: Callable[..., Any] = anyio.to_thread.run_sync

    async def counting(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        target = getattr(func, "func", func)  # starlette wraps the call in functools.partial
        hops.append(getattr(target, "__name__", repr(target)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    yield hops


async def test_the_context_dependency_needs_no_worker_thread(wire: Wire, era: str, thread_hops: list[str]) -> None:
    EVENTS.clear()
    result = result_of(await wire.call_tool(era, "lookup", {"key": "k1"}, headers={"x-tenant": "acme"}, request_id=7))
    assert result["structuredContent"] == {"value": "v1", "tenant": "acme", "request_id": "7"}
    assert EVENTS == ["db open", "db closed"]
    assert tool_text_of(await wire.call_tool(era, "progress", request_id=8)) == "id 8"
    assert thread_hops == []


async def test_a_plain_def_dependency_still_runs_in_the_thread_pool(wire: Wire, era: str, thread_hops: list[str]) -> None:
    assert tool_text_of(await wire.call_tool(era, "threaded")) == "from a thread"
    assert thread_hops == ["sync_dependency"]


def tool_text_of(response: Any) -> str:
    return result_of(response)["content"][0]["text"]
