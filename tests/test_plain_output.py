"""A tool returning ``int``, ``str`` or ``bool`` (``ToolDef.plain_output``) shapes a value of
exactly that type itself instead of through its output adapter: the same ``CallToolResult`` as
the general path; any other value (a subclass, a huge integer, another type) keeps the general path."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any

import pytest
from conftest import Wire, make_app, make_router, open_client, result_of
from pydantic import Field

from fastapi_mcp_ctx._handlers.results import shape_result
from fastapi_mcp_ctx._wire.jsonrpc import dumps, result_message
from fastapi_mcp_ctx.errors import ToolError


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


RETURNS: list[Any] = [
    0, 5, -5, 2**63, 2**64 - 1, 2**64, -(2**64), 10**100, 10**5000, True, False, Level.HIGH, 2.0, None,
    "", "five", "é\u2028", "\ud800", Name("n"), "5", [1], {"a": 1},
]  # fmt: skip


def _tools() -> Any:
    router = make_router()

    @router.tool()
    async def number() -> int:
        """An int."""
        return 0

    @router.tool()
    async def text() -> str:
        """A str."""
        return ""

    @router.tool()
    async def flag() -> bool:
        """A bool."""
        return False

    @router.tool()
    async def bounded() -> Annotated[int, Field(ge=0)]:
        """A constrained int: the general path."""
        return 0

    @router.tool()
    async def maybe() -> int | None:
        """An optional int: the general path."""
        return 0

    return router.registry


def _shaped(tool: Any, value: Any) -> Any:
    try:
        result = shape_result(tool, value)
    except ToolError as exc:
        return ("refused", str(exc))
    return (result, dumps(result_message(1, result)))


def test_which_outputs_are_plain() -> None:
    registry = _tools()
    assert [registry.get(n).plain_output for n in ("number", "text", "flag", "bounded", "maybe")] == [int, str, bool, None, None]


@pytest.mark.parametrize("name", ["number", "text", "flag"])
def test_a_plain_output_shapes_as_the_adapter_does(name: str) -> None:
    tool = _tools().get(name)
    general = dataclasses.replace(tool, plain_output=None)
    for value in RETURNS:
        assert _shaped(tool, value) == _shaped(general, value), value
    assert shape_result(tool, 5 if name == "number" else "5" if name == "text" else True)["structuredContent"] is not None


async def test_a_plain_output_on_the_wire(era: str) -> None:
    router = make_router()

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    async with open_client(make_app(router)) as client:
        result = result_of(await Wire(client).call_tool(era, "add", {"a": 2, "b": 3}))
    assert result["content"] == [{"type": "text", "text": "5"}]
    assert result["structuredContent"] == {"result": 5} and result["isError"] is False
