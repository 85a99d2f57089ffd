import pytest

from catalog import app
from fastapi_mcp_ctx.testing import Era, McpResponseError, McpTestClient


async def test_resources_are_listed_and_read(era: Era) -> None:
    async with McpTestClient(app, era=era, log_level="info") as client:
        assert [r["uri"] for r in await client.list_resources()] == ["catalog://books"]
        assert [t["uriTemplate"] for t in await client.list_resource_templates()] == ["catalog://books/{book_id}"]
        answer = await client.read_resource("catalog://books/1")
        assert answer.result["contents"][0]["text"] == '{"id":1,"title":"Dune","author":"Frank Herbert"}'
        assert [entry["data"] for entry in answer.logs] == [{"message": "read", "book_id": 1}]


async def test_an_unknown_book_is_an_error(era: Era) -> None:
    async with McpTestClient(app, era=era) as client:
        with pytest.raises(McpResponseError) as caught:
            await client.read_resource("catalog://books/9")
    assert caught.value.code == (-32002 if era == "legacy" else -32602)
    assert caught.value.data is not None and caught.value.data["uri"] == "catalog://books/9"


async def test_a_prompt_is_listed_and_rendered(era: Era) -> None:
    async with McpTestClient(app, era=era) as client:
        prompts = await client.list_prompts()
        assert [(p["name"], [a["name"] for a in p["arguments"]]) for p in prompts] == [("review", ["book_id", "tone"])]
        answer = await client.get_prompt("review", {"book_id": "2", "tone": "harsh"})
        assert answer.result["messages"][0]["content"]["text"] == "Write a harsh review of Emma by Jane Austen."
        with pytest.raises(McpResponseError) as caught:
            await client.get_prompt("review", {"book_id": "7"})
        assert caught.value.code == -32602


async def test_arguments_are_completed(era: Era) -> None:
    async with McpTestClient(app, era=era) as client:
        answer = await client.complete({"type": "ref/prompt", "name": "review"}, {"name": "book_id", "value": "1"})
        assert answer.result["completion"]["values"] == ["1"]
        template = {"type": "ref/resource", "uri": "catalog://books/{book_id}"}
        answer = await client.complete(template, {"name": "book_id", "value": ""}, context={})
        assert answer.result["completion"]["values"] == ["1", "2"]
