"""The official MCP client against ``examples/items.py`` over real HTTP (issue 19's "done when"):
``load_item`` serves the tool ``rename_item`` (``item_id`` an argument declared by the dependency
only) and the FastAPI path operation ``PUT /items/{item_id}`` of the same app, in both client
modes (``legacy`` handshake and stateless ``2026-07-28``)."""

from __future__ import annotations

import anyio
import httpx
import pytest
from serving import uvicorn_thread
from test_clients import MODES, client_for

from examples import items


@pytest.mark.parametrize("mode", MODES)
async def test_rename_item_lists_and_renames_with_the_dependency_argument(mode: str) -> None:
    items.ITEMS.clear()
    items.ITEMS[1] = items.Item(id=1, name="hammer")
    with uvicorn_thread(items.app) as server_url, anyio.fail_after(15):
        async with client_for(server_url, mode) as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "rename_item")
            assert tool.input_schema["properties"]["item_id"]["type"] == "integer"
            assert tool.input_schema["properties"]["new_name"]["type"] == "string"
            assert sorted(tool.input_schema["required"]) == ["item_id", "new_name"]
            result = await client.call_tool("rename_item", {"item_id": 1, "new_name": "mallet"})
            assert result.is_error is False
            assert result.structured_content == {"id": 1, "name": "mallet"}
            missing = await client.call_tool("rename_item", {"item_id": 2, "new_name": "saw"})
            assert missing.is_error is True
        assert items.ITEMS[1].name == "mallet"
        base = server_url.rsplit("/mcp", 1)[0]
        async with httpx.AsyncClient() as http:
            put = await http.put(f"{base}/items/1", params={"new_name": "anvil"})
            absent = await http.put(f"{base}/items/2", params={"new_name": "anvil"})
    assert put.status_code == 200 and put.json() == {"id": 1, "name": "anvil"}
    assert absent.status_code == 404 and absent.json() == {"detail": "No item 2"}
