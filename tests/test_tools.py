"""Tools: argument binding, error semantics, output schema, pagination, in both eras.

Known faults B33 (arguments bound, not defaults), B35 (invalid arguments → isError),
B36 (isError with an output schema stays isError), B37 (pagination). Spec 2025-11-25
``server/tools`` §Error Handling, §Output Schema; ``server/utilities/pagination``.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

import mcp_types as types
import pytest
from conftest import Wire, assert_error, final_message, make_app, make_router, open_client, result_of, tool_text
from fastapi import Depends
from pydantic import BaseModel, Field

from fastapi_mcp_ctx import Context, ToolError, mcp_context


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


class Quotient(BaseModel):
    value: float


def build_app() -> Any:
    router = make_router()

    @router.tool()
    async def list_items(skip: int = 0, limit: int = 10) -> dict[str, int]:
        """Paging arguments."""
        return {"skip": skip, "limit": limit}

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @router.tool()
    async def create_item(item: Item, count: int = 1) -> dict[str, Any]:
        """A pydantic body argument."""
        return {"item": item.model_dump(), "count": count}

    @router.tool()
    async def odd_names(kwargs: str, ctx_value: str = "d", ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """A parameter named kwargs next to a context dependency."""
        return {"kwargs": kwargs, "ctx_value": ctx_value, "request_id": ctx.request_id}

    @router.tool()
    async def plain_ctx(ctx: str) -> str:
        """A plain argument named ctx."""
        return ctx

    @router.tool()
    async def described(q: Annotated[str, Field(description="The query", min_length=2)]) -> str:
        """Field constraints."""
        return q

    @router.tool()
    async def divide(a: int, b: int) -> Quotient:
        """Structured output; b=0 is an anticipated error."""
        if b == 0:
            raise ToolError("division by zero")
        return Quotient(value=a / b)

    @router.tool()
    async def divide_result(a: int, b: int) -> Quotient:
        """Returns a CallToolResult error directly."""
        if b == 0:
            return types.CallToolResult(content=[types.TextContent(type="text", text="division by zero")], is_error=True)  # type: ignore[return-value]
        return Quotient(value=a / b)

    @router.tool()
    async def bad_output() -> Quotient:
        """Violates its own output schema on success."""
        return {"value": "NaN"}  # type: ignore[return-value]

    @router.tool()
    async def hinted_error() -> str:
        """ToolError with a recovery hint."""
        raise ToolError("not found", recovery_hint="try another id")

    @router.tool()
    async def crash() -> str:
        """Unexpected exception."""
        raise ValueError("secret internals")

    @router.tool()
    def sync_add(a: int, b: int) -> int:
        """A sync tool."""
        return a + b

    @router.tool()
    async def nothing() -> None:
        """Returns None."""
        return None

    @router.tool()
    async def text_block() -> types.TextContent:
        """Returns a content block."""
        return types.TextContent(type="text", text="block")

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return build_app()


def structured(response: Any) -> Any:
    result = result_of(response)
    assert result["isError"] is False, result
    return result["structuredContent"]


# -- B33: argument binding ----------------------------------------------------------------------


async def test_b33_arguments_are_bound_not_defaults(wire: Wire, era: str) -> None:
    assert structured(await wire.call_tool(era, "list_items", {"skip": 5, "limit": 2})) == {"skip": 5, "limit": 2}


async def test_b33_defaults_apply_only_when_absent(wire: Wire, era: str) -> None:
    assert structured(await wire.call_tool(era, "list_items", {"limit": 3})) == {"skip": 0, "limit": 3}
    assert structured(await wire.call_tool(era, "list_items", {})) == {"skip": 0, "limit": 10}


async def test_b33_falsy_values_are_bound(wire: Wire, era: str) -> None:
    assert structured(await wire.call_tool(era, "list_items", {"skip": 0, "limit": 0})) == {"skip": 0, "limit": 0}


async def test_b33_pydantic_model_argument(wire: Wire, era: str) -> None:
    args = {"item": {"name": "pen", "price": 1.5, "tags": ["x"]}, "count": 4}
    assert structured(await wire.call_tool(era, "create_item", args)) == {"item": {"name": "pen", "price": 1.5, "tags": ["x"]}, "count": 4}


async def test_b33_parameters_named_kwargs_and_ctx(wire: Wire, era: str) -> None:
    out = structured(await wire.call_tool(era, "odd_names", {"kwargs": "k", "ctx_value": "v"}, request_id=12))
    assert out == {"kwargs": "k", "ctx_value": "v", "request_id": 12}
    result = result_of(await wire.call_tool(era, "plain_ctx", {"ctx": "plain"}))
    assert tool_text(result) == "plain"


async def test_b33_extra_arguments_are_ignored(wire: Wire, era: str) -> None:
    assert structured(await wire.call_tool(era, "add", {"a": 1, "b": 2, "c": 3})) == {"result": 3}


async def test_b33_input_schema_names_match_bound_names(wire: Wire, era: str) -> None:
    result = result_of(await wire.request(era, "tools/list"))
    tools = {t["name"]: t for t in result["tools"]}
    assert set(tools["list_items"]["inputSchema"]["properties"]) == {"skip", "limit"}
    assert set(tools["odd_names"]["inputSchema"]["properties"]) == {"kwargs", "ctx_value"}
    assert tools["plain_ctx"]["inputSchema"]["required"] == ["ctx"]
    assert tools["described"]["inputSchema"]["properties"]["q"]["description"] == "The query"
    assert "item" in tools["create_item"]["inputSchema"]["properties"]


async def test_sync_tool_runs(wire: Wire, era: str) -> None:
    assert structured(await wire.call_tool(era, "sync_add", {"a": 2, "b": 5})) == {"result": 7}


async def test_none_and_content_block_results(wire: Wire, era: str) -> None:
    none = result_of(await wire.call_tool(era, "nothing"))
    assert none["content"] == [] and none["isError"] is False
    block = result_of(await wire.call_tool(era, "text_block"))
    assert block["content"] == [{"type": "text", "text": "block"}]


# -- B35: invalid arguments are tool execution errors -----------------------------------------


@pytest.mark.parametrize(
    "arguments,field",
    [({"a": "x", "b": 2}, "a"), ({"a": 1}, "b"), ({}, "a"), ({"a": [1], "b": 2}, "a")],
    ids=["wrong-type", "missing-b", "missing-all", "array"],
)
async def test_b35_invalid_arguments_are_is_error_results(wire: Wire, era: str, arguments: dict[str, Any], field: str) -> None:
    response = await wire.call_tool(era, "add", arguments, request_id=35)
    message = final_message(response)
    assert "error" not in message, f"input validation must not be a protocol error: {message}"
    assert response.status_code == 200
    result = message["result"]
    assert result["isError"] is True
    assert field in tool_text(result)
    if era == "modern":
        assert result["resultType"] == "complete"


async def test_b35_huge_number_is_is_error_result(wire: Wire, era: str) -> None:
    """``1e309`` is valid JSON; it does not fit an int, which is an argument error, not a parse error."""
    params = b'{"name":"add","arguments":{"a":1e309,"b":1}}'
    if era == "legacy":
        await wire.initialize()
        headers = wire.legacy_headers()
        meta = b""
    else:
        headers = wire.modern_headers("tools/call", {"name": "add"})
        meta = b',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
    body = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":' + params[:-1] + meta + b"}}"
    response = await wire.post(None, headers, content=body)
    message = final_message(response)
    assert "error" not in message, message
    assert message["result"]["isError"] is True


async def test_b35_field_constraint_is_is_error_result(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "described", {"q": "x"}))
    assert result["isError"] is True
    assert "q" in tool_text(result)


async def test_b35_unknown_tool_is_invalid_params(wire: Wire, era: str) -> None:
    if era == "legacy":
        await wire.initialize()
    response = await wire.call_tool(era, "no_such_tool", {}, request_id="u")
    error = assert_error(response, 200 if era == "legacy" else 400, -32602, request_id="u")
    assert "no_such_tool" in error["message"]


async def test_b35_missing_name_is_invalid_params(wire: Wire) -> None:
    await wire.initialize()
    response = await wire.legacy("tools/call", {"arguments": {}}, request_id=8)
    assert_error(response, 200, -32602, request_id=8)


# -- B36: error results with an output schema ----------------------------------------------------


async def test_b36_tool_error_with_output_schema_stays_is_error(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "divide", {"a": 1, "b": 0}, request_id=36))
    assert result["isError"] is True
    assert tool_text(result) == "division by zero"
    # no structuredContent that breaks the outputSchema (clients check it even on errors); the
    # error envelope (docs/guide.md#errors) rides in _meta
    assert "structuredContent" not in result
    assert result["_meta"]["fastapi-mcp-ctx/error"] == {
        "code": 1, "message": "division by zero", "data": {"requestId": 36, "reason": "tool_error"}
    }


async def test_b36_call_tool_result_error_passes_through(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "divide_result", {"a": 1, "b": 0}))
    assert result["isError"] is True
    assert tool_text(result) == "division by zero"


async def test_b36_success_carries_conforming_structured_content(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "divide", {"a": 1, "b": 4}))
    assert result["isError"] is False
    assert result["structuredContent"] == {"value": 0.25}
    assert tool_text(result) == '{"value":0.25}'
    listing = result_of(await wire.request(era, "tools/list"))
    schema = next(t for t in listing["tools"] if t["name"] == "divide")["outputSchema"]
    assert schema["type"] == "object" and "value" in schema["properties"]


async def test_b36_success_violating_output_schema_is_reported_as_error(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "bad_output"))
    assert result["isError"] is True, f"a non-conforming structuredContent must not be passed on: {result}"


async def test_tool_error_recovery_hint(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "hinted_error"))
    assert result["isError"] is True
    assert "not found" in tool_text(result)
    assert "try another id" in tool_text(result)


async def test_crash_is_generic_is_error(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "crash", request_id=99))
    assert result["isError"] is True
    assert "secret internals" not in tool_text(result)


# -- B37: pagination --------------------------------------------------------------------------------


@functools.cache
def build_many(count: int = 250, page_size: int = 100) -> Any:
    router = make_router(page_size=page_size)
    for i in range(count):

        async def tool(i: int = i) -> int:
            return i

        router.add_tool(tool, name=f"tool_{i:03d}", description=f"Tool {i}")
    return make_app(router)


@pytest.mark.parametrize("era_name", ["legacy", "modern"])
async def test_b37_next_cursor_advances_and_terminates(era_name: str) -> None:
    async with open_client(build_many()) as client:
        wire = Wire(client)
        names: list[str] = []
        cursors: list[str] = []
        cursor: str | None = None
        for _ in range(10):
            params = {"cursor": cursor} if cursor is not None else None
            result = result_of(await wire.request(era_name, "tools/list", params))
            names.extend(t["name"] for t in result["tools"])
            cursor = result.get("nextCursor")
            if cursor is None:
                break
            assert cursor not in cursors, "a cursor must never repeat"
            cursors.append(cursor)
        assert cursor is None, "pagination did not terminate"
        assert len(cursors) == 2
        assert names == [f"tool_{i:03d}" for i in range(250)]


async def test_b37_single_page_has_no_next_cursor(wire: Wire, era: str) -> None:
    result = result_of(await wire.request(era, "tools/list"))
    assert "nextCursor" not in result


@pytest.mark.parametrize("cursor", ["bogus", "c1", "dG9vbHM6OTk5OQ", "dG9vbHM6MA", "x" * 100, 5], ids=["bogus", "c1", "past-end", "zero", "long", "int"])
async def test_b37_bogus_cursor_is_invalid_params(cursor: Any) -> None:
    async with open_client(build_many()) as client:
        wire = Wire(client)
        await wire.initialize()
        response = await wire.legacy("tools/list", {"cursor": cursor}, request_id=37)
        assert_error(response, 200, -32602, request_id=37)
        response = await wire.modern("tools/list", {"cursor": cursor}, request_id=38)
        assert_error(response, 400, -32602, request_id=38)


async def test_b37_exact_multiple_of_page_size_ends_without_cursor() -> None:
    async with open_client(build_many(200, 100)) as client:
        wire = Wire(client)
        first = result_of(await wire.modern("tools/list"))
        assert len(first["tools"]) == 100
        second = result_of(await wire.modern("tools/list", {"cursor": first["nextCursor"]}))
        assert len(second["tools"]) == 100
        assert "nextCursor" not in second
        assert second["cacheScope"] == first["cacheScope"]
