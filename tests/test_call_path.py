"""What one ``tools/call`` costs beyond the tool, and that the shortcuts keep FastAPI's meaning.

- No worker thread nobody asked for: FastAPI runs a plain ``def`` dependency in its thread
  pool; a thread hop per call for the ``Context`` lookup cost the dependency benchmark half
  its throughput and, at 32 concurrent calls, a p99 of 60 ms (GIL hand-offs between the loop
  and the pool).
- A top-level ``Depends(mcp_context)`` is filled with the call's Context without a solve;
  ``app.dependency_overrides[mcp_context]`` (read per call) and nested uses still go through
  FastAPI and see the same object.
- Yield dependencies: the handler's exception is thrown into them, a failing dependency
  tears down the ones entered before it.
- Output validation: pydantic's ``warnings="error"`` serialization check (a few µs) runs only
  for outputs whose validation passes instances through (models...), where it still catches a
  model whose field was reassigned to the wrong type.

bench/README.md ``## Profile of the d workload`` has the figures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any

import anyio.to_thread
import pytest
from conftest import Wire, add_lookup_tool, make_app, make_router, result_of
from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel

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


async def watching() -> AsyncIterator[str]:
    EVENTS.append("watching open")
    try:
        yield "w"
    except Exception as exc:
        EVENTS.append(f"watching saw {type(exc).__name__}")
        raise
    finally:
        EVENTS.append("watching closed")


async def refusing() -> str:
    raise HTTPException(404, "no such thing")


class Point(BaseModel):
    x: int


async def context_id(ctx: Context = Depends(mcp_context)) -> int:
    return id(ctx)


@pytest.fixture
def app() -> FastAPI:
    router = make_router()

    add_lookup_tool(router, get_db)

    @router.tool()
    async def progress(ctx: Context = Depends(mcp_context)) -> str:
        """Only the Context."""
        return f"id {ctx.request_id}"

    @router.tool()
    async def threaded(value: str = Depends(sync_dependency)) -> str:
        """A plain def dependency: FastAPI runs it in the thread pool, as on a path operation."""
        return value

    @router.tool()
    async def same_context(
        ctx: Annotated[Context, Depends(mcp_context)],
        nested: int = Depends(context_id),
        again: Context = Depends(mcp_context),
    ) -> dict[str, Any]:
        """The Context three ways: Annotated, through a dependency, as a default."""
        return {"same": id(ctx) == nested and ctx is again, "kind": type(ctx).__name__}

    @router.tool()
    async def crashing(w: str = Depends(watching)) -> str:
        """The handler fails after the yield dependency opened."""
        raise ValueError("boom")

    @router.tool()
    async def refused(w: str = Depends(watching), r: str = Depends(refusing)) -> str:
        """The second dependency fails after the first opened."""
        return w + r

    @router.tool()
    async def reassigned() -> Point:
        """A model whose field was reassigned after validation (no validate_assignment)."""
        point = Point(x=1)
        point.x = "not a number"  # type: ignore[assignment]
        return point

    @router.tool()
    async def miscounted() -> dict[str, int]:
        """A dict output with a value of the wrong type."""
        return {"n": "three"}  # type: ignore[dict-item]

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
    result = result_of(await wire.call_tool(era, "lookup", {"key": "k1"}, headers={"x-tenant": "acme"}))
    assert result["structuredContent"] == {"value": "v1", "tenant": "acme"}
    assert EVENTS == ["db open", "db closed"]
    assert tool_text_of(await wire.call_tool(era, "progress", request_id=8)) == "id 8"
    assert thread_hops == []


async def test_a_plain_def_dependency_still_runs_in_the_thread_pool(wire: Wire, era: str, thread_hops: list[str]) -> None:
    assert tool_text_of(await wire.call_tool(era, "threaded")) == "from a thread"
    assert thread_hops == ["sync_dependency"]


def tool_text_of(response: Any) -> str:
    return result_of(response)["content"][0]["text"]


async def test_the_context_is_one_object_however_it_is_declared(wire: Wire, era: str) -> None:
    assert result_of(await wire.call_tool(era, "same_context"))["structuredContent"] == {"same": True, "kind": "Context"}


async def test_an_override_of_mcp_context_is_read_on_every_call(app: FastAPI, wire: Wire, era: str) -> None:
    class FakeContext:
        request_id = "fake"

    assert tool_text_of(await wire.call_tool(era, "progress", request_id=1)) == "id 1"
    app.dependency_overrides[mcp_context] = FakeContext
    try:
        assert tool_text_of(await wire.call_tool(era, "progress", request_id=2)) == "id fake"
        kinds = result_of(await wire.call_tool(era, "same_context"))["structuredContent"]
        assert kinds == {"same": True, "kind": "FakeContext"}  # one override, one cached value per call
    finally:
        app.dependency_overrides.clear()
    assert tool_text_of(await wire.call_tool(era, "progress", request_id=3)) == "id 3"


async def test_a_yield_dependency_sees_the_handlers_exception(wire: Wire, era: str) -> None:
    EVENTS.clear()
    result = result_of(await wire.call_tool(era, "crashing"))
    assert result["isError"] is True
    assert EVENTS == ["watching open", "watching saw ValueError", "watching closed"]


async def test_a_failing_dependency_tears_down_the_ones_opened_before_it(wire: Wire, era: str) -> None:
    EVENTS.clear()
    result = result_of(await wire.call_tool(era, "refused"))
    assert result["isError"] is True
    assert "no such thing" in result["content"][0]["text"]
    assert EVENTS == ["watching open", "watching saw HTTPException", "watching closed"]


@pytest.mark.parametrize("tool", ["reassigned", "miscounted"])
async def test_an_output_breaking_its_schema_is_an_error_result(wire: Wire, era: str, tool: str) -> None:
    result = result_of(await wire.call_tool(era, tool))
    assert result["isError"] is True
    assert "structuredContent" not in result
    assert "does not match its outputSchema" in result["content"][0]["text"]


def test_only_outputs_holding_instances_keep_the_serialization_check() -> None:
    router = make_router()

    async def rebuilt() -> dict[str, list[int | None]]:
        return {}

    async def scalar() -> int:
        return 1

    async def model() -> Point:
        return Point(x=1)

    async def nested() -> dict[str, Point]:
        return {}

    for tool in (rebuilt, scalar, model, nested):
        router.add_tool(tool)
    checked = {name: router.registry.get(name).output_passthrough for name in ("rebuilt", "scalar", "model", "nested")}  # type: ignore[union-attr]
    assert checked == {"rebuilt": False, "scalar": False, "model": True, "nested": True}
