from fastapi_mcp_ctx.testing import McpTestClient


async def test_add_note_logs(client: McpTestClient) -> None:
    result = await client.call_tool("add_note", {"text": "hello"})
    assert result.logs == [{"level": "info", "logger": "add_note", "data": {"message": "stored", "note_id": 1}}]


async def test_import_reports_progress(client: McpTestClient) -> None:
    result = await client.call_tool("import_notes", {"texts": ["a", "b"]}, progress_token="import-1")
    assert result.structured == {"result": 2}
    assert result.progress == [
        {"progressToken": "import-1", "progress": 1, "total": 2, "message": "imported 1 of 2"},
        {"progressToken": "import-1", "progress": 2, "total": 2, "message": "imported 2 of 2"},
    ]


async def test_no_progress_without_a_token(client: McpTestClient) -> None:
    result = await client.call_tool("import_notes", {"texts": ["a"]})
    assert result.progress == []


async def test_everything_the_client_received(client: McpTestClient) -> None:
    await client.call_tool("add_note", {"text": "one"})
    await client.call_tool("add_note", {"text": "two"})
    assert [entry["data"]["note_id"] for entry in client.logs] == [1, 2]
    assert [message["method"] for message in client.notifications] == ["notifications/message"] * 2
