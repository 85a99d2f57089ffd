"""``McpTestClient``'s resource, prompt and completion helpers (``testing._features``), both eras.

A real app; what the client sent is judged by what the server did with it (pages followed,
the ``Mcp-Name`` header accepted, ``_meta.progressToken`` reaching ``ctx.report_progress``,
``context.arguments`` reaching the completer), errors by the ``McpResponseError`` raised.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_app, make_router
from fastapi import Depends, Request

from fastapi_mcp_ctx import Context, mcp_context
from fastapi_mcp_ctx.errors import McpResponseError
from fastapi_mcp_ctx.testing import Era, McpResponse, McpTestClient

ERAS = ["legacy", "modern"]
SEEN: list[dict[str, Any]] = []


def build_app(**settings: Any) -> Any:
    router = make_router(**settings)

    @router.resource("mem://a", mime_type="text/plain")
    def a() -> str:
        """A."""
        return "alpha"

    @router.resource("mem://b", mime_type="text/plain")
    async def b(request: Request, ctx: Context = Depends(mcp_context)) -> str:
        """B: reports progress; tells which Mcp-Name header it got."""
        await ctx.report_progress(1, 1, "done")
        return request.headers.get("mcp-name", "(none)")

    @router.resource("mem://items/{item}", mime_type="text/plain")
    def item(item: str) -> str:
        """An item."""
        return item.upper()

    @router.resource("mem://pairs/{left}/{right}", mime_type="text/plain")
    def pair(left: str, right: str) -> str:
        """A pair."""
        return left + right

    def complete_color(value: str, arguments: dict[str, str]) -> list[str]:
        SEEN.append(dict(arguments))
        return [c for c in ("red", "green", "blue") if c.startswith(value)]

    @router.prompt(complete={"color": complete_color})
    def paint(color: str, shade: str = "light") -> str:
        """Paint."""
        return f"{shade} {color}"

    @router.prompt()
    def rest() -> str:
        """Rest."""
        return "rest"

    return make_app(router)


@pytest.mark.parametrize("era", ERAS)
async def test_lists_follow_every_page(era: Era) -> None:
    async with McpTestClient(build_app(page_size=1), era=era) as client:
        assert [r["uri"] for r in await client.list_resources()] == ["mem://a", "mem://b"]
        templates = await client.list_resource_templates()
        assert [t["uriTemplate"] for t in templates] == ["mem://items/{item}", "mem://pairs/{left}/{right}"]
        assert [p["name"] for p in await client.list_prompts()] == ["paint", "rest"]


@pytest.mark.parametrize("era", ERAS)
async def test_read_resource_sends_the_era_envelope_and_the_progress_token(era: Era) -> None:
    async with McpTestClient(build_app(), era=era) as client:
        answer = await client.read_resource("mem://b", progress_token="t1")
        assert isinstance(answer, McpResponse)
        expected = "mem://b" if era == "modern" else "(none)"  # 2026: Mcp-Name mirrors params.uri
        assert answer.result["contents"] == [{"uri": "mem://b", "mimeType": "text/plain", "text": expected}]
        assert [(p["progressToken"], p["progress"]) for p in answer.progress] == [("t1", 1)]
        assert (await client.read_resource("mem://items/x%20y")).result["contents"][0]["text"] == "X Y"


@pytest.mark.parametrize("era", ERAS)
async def test_read_resource_errors_raise(era: Era) -> None:
    async with McpTestClient(build_app(), era=era) as client:
        with pytest.raises(McpResponseError) as missing:
            await client.read_resource("mem://nothing")
        with pytest.raises(McpResponseError) as malformed:
            await client.read_resource("mem://items/%ZZ")
    assert missing.value.code == (-32002 if era == "legacy" else -32602)
    assert missing.value.method == "resources/read" and missing.value.data is not None
    assert missing.value.data["uri"] == "mem://nothing"
    assert malformed.value.code == -32602


@pytest.mark.parametrize("era", ERAS)
async def test_get_prompt_with_and_without_arguments(era: Era) -> None:
    async with McpTestClient(build_app(), era=era) as client:
        painted = await client.get_prompt("paint", {"color": "red", "shade": "dark"})
        assert painted.result["messages"] == [{"role": "user", "content": {"type": "text", "text": "dark red"}}]
        assert (await client.get_prompt("rest")).result["messages"][0]["content"]["text"] == "rest"
        for name, arguments in (("nope", None), ("paint", {})):  # unknown prompt; missing required argument
            with pytest.raises(McpResponseError) as caught:
                await client.get_prompt(name, arguments)
            assert caught.value.code == -32602 and caught.value.method == "prompts/get"


@pytest.mark.parametrize("era", ERAS)
async def test_complete_sends_ref_argument_and_context(era: Era) -> None:
    SEEN.clear()
    async with McpTestClient(build_app(), era=era) as client:
        ref = {"type": "ref/prompt", "name": "paint"}
        answer = await client.complete(ref, {"name": "color", "value": "g"}, context={"shade": "dark"})
        assert answer.result["completion"]["values"] == ["green"]
        bare = await client.complete(ref, {"name": "color", "value": ""})
        assert bare.result["completion"]["values"] == ["red", "green", "blue"]
        unknown = await client.complete(ref, {"name": "shade", "value": ""})  # no completer: empty
        assert unknown.result["completion"]["values"] == []
        with pytest.raises(McpResponseError) as caught:
            await client.complete({"type": "ref/prompt", "name": "nope"}, {"name": "x", "value": ""})
    assert SEEN == [{"shade": "dark"}, {}]
    assert caught.value.code == -32602


@pytest.mark.parametrize("era", ERAS)
async def test_an_app_without_resources_or_prompts_answers_method_not_found(era: Era) -> None:
    router = make_router()

    @router.tool()
    async def ping_tool() -> str:
        """Ping."""
        return "pong"

    async with McpTestClient(make_app(router), era=era) as client:
        for call in (client.list_resources(), client.list_prompts(), client.read_resource("mem://a")):
            with pytest.raises(McpResponseError) as caught:
                await call
            assert caught.value.code == -32601


async def test_a_cursor_that_never_advances_is_an_error_not_a_hang() -> None:
    """Known fault B37 from the client's side: a server repeating its nextCursor."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/mcp")
    async def stuck(request: Request) -> dict[str, Any]:
        body = await request.json()
        result = {"resources": [{"uri": "mem://again", "name": "again"}], "nextCursor": "same"}
        return {"jsonrpc": "2.0", "id": body["id"], "result": result}

    async with McpTestClient(app, era="modern", validate=False) as client:  # the stub's result is not 2026-shaped
        with pytest.raises(McpResponseError) as caught:
            await client.list_resources()
    assert "does not advance" in caught.value.message and caught.value.method == "resources/list"
