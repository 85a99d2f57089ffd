"""A tool's keyword arguments from its validated model (``ToolDef.model_arguments``): the model's
``__dict__`` copied when its fields are exactly the handler's arguments, each field read otherwise;
the same values either way."""

from __future__ import annotations

from typing import Any

from conftest import Wire, make_app, make_router, open_client, result_of
from fastapi import Depends

from fastapi_mcp_ctx import Context, mcp_context


def _app() -> tuple[Any, Any]:
    router = make_router()

    @router.tool()
    async def plain(a: int, b: str = "x", ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Echo its arguments (a default among them) and that the Context came too."""
        return {"a": a, "b": b, "ctx": type(ctx).__name__ == "Context"}

    def declared(c: int) -> int:
        return c * 10

    @router.tool()
    async def graph(a: int, c10: int = Depends(declared)) -> dict[str, Any]:
        """An argument its dependency declares: the graph binds the values."""
        return {"a": a, "c10": c10}

    return make_app(router), router


async def test_kwargs_come_from_the_model_or_the_graph_with_the_same_values() -> None:
    app, router = _app()
    plain_def, graph_def = router.registry.get("plain"), router.registry.get("graph")
    assert plain_def is not None and graph_def is not None
    assert plain_def.model_arguments, "the handler's own model: its __dict__ is the kwargs"
    assert not graph_def.model_arguments, "a dependency declares an argument: the graph binds it"
    async with open_client(app) as client:
        wire = Wire(client)
        for era in ("legacy", "modern"):
            first = result_of(await wire.call_tool(era, "plain", {"a": 1}))
            assert first["structuredContent"] == {"a": 1, "b": "x", "ctx": True}
            again = result_of(await wire.call_tool(era, "plain", {"a": 2, "b": "y"}))  # the kwargs of one call never leak into the next
            assert again["structuredContent"] == {"a": 2, "b": "y", "ctx": True}
            bound = result_of(await wire.call_tool(era, "graph", {"a": 1, "c": 4}))
            assert bound["structuredContent"] == {"a": 1, "c10": 40}
