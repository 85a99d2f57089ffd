from fastapi_mcp_ctx.testing import McpTestClient


async def test_tools_are_listed(client: McpTestClient) -> None:
    tools = await client.list_tools()
    assert [tool["name"] for tool in tools] == ["add_note", "import_notes", "count_visit", "whoami"]


async def test_add_note(client: McpTestClient) -> None:
    result = await client.call_tool("add_note", {"text": "buy milk"})
    assert result.is_error is False
    assert result.structured == {"id": 1, "text": "buy milk", "author": "ada"}


async def test_scalar_results_are_wrapped(client: McpTestClient) -> None:
    result = await client.call_tool("whoami")
    assert result.structured == {"result": "ada of acme"}
    assert result.text == "ada of acme"


async def test_invalid_arguments_are_a_tool_error(client: McpTestClient) -> None:
    result = await client.call_tool("add_note", {"text": ""})
    assert result.is_error is True
    assert "text" in result.text
