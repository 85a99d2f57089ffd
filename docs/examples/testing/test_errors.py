import pytest

from fastapi_mcp_ctx.testing import Era, McpResponseError, McpTestClient
from notes import app


async def test_without_an_api_key_is_401(era: Era) -> None:
    with pytest.raises(McpResponseError) as caught:
        async with McpTestClient(app, era=era) as client:
            await client.list_tools()
    assert caught.value.http_status == 401
    assert "www-authenticate" not in caught.value.headers  # the app's own scheme: no Bearer challenge


async def test_unknown_tool_is_a_protocol_error(client: McpTestClient) -> None:
    with pytest.raises(McpResponseError) as caught:
        await client.call_tool("no_such_tool")
    assert caught.value.code == -32602


async def test_any_request_and_raw_http() -> None:
    async with McpTestClient(app, era="modern", headers={"X-API-Key": "key-ada"}) as client:
        discover = await client.request("server/discover")
        assert "2026-07-28" in discover.result["supportedVersions"]
        raw = await client.http.post(  # the httpx client, for what no method covers
            "/mcp", content=b"{not json", headers={"Content-Type": "application/json", "Accept": "application/json"}
        )
        assert raw.status_code == 400
        assert raw.json()["error"]["code"] == -32700
