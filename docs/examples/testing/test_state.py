from fastapi_mcp_ctx import Principal
from fastapi_mcp_ctx.testing import Era, McpTestClient
from notes import app, authenticate


async def test_visits_are_counted(client: McpTestClient) -> None:
    results = [await client.call_tool("count_visit", {"page": "home"}) for _ in range(3)]
    assert [result.structured for result in results] == [{"result": 1}, {"result": 2}, {"result": 3}]


async def test_state_is_empty_again_in_the_next_test(client: McpTestClient) -> None:
    result = await client.call_tool("count_visit", {"page": "home"})
    assert result.structured == {"result": 1}  # the clean_state fixture emptied ctx.state


async def test_state_is_per_tenant(client: McpTestClient, era: Era) -> None:
    await client.call_tool("count_visit", {"page": "home"})
    app.dependency_overrides[authenticate] = lambda: Principal(subject="eve", tenant_id="globex")
    async with McpTestClient(app, era=era) as other_tenant:
        result = await other_tenant.call_tool("count_visit", {"page": "home"})
    assert result.structured == {"result": 1}  # globex does not see acme's visits


async def test_reset_between_calls(client: McpTestClient) -> None:
    await client.call_tool("count_visit", {"page": "home"})
    assert await client.reset_state() == 1  # the number of keys deleted
    result = await client.call_tool("count_visit", {"page": "home"})
    assert result.structured == {"result": 1}
