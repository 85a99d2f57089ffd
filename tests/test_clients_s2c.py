"""The official MCP client (``mcp`` 2.3) answers ``ctx.send_request`` over real HTTP.

uvicorn serves an app on 127.0.0.1 (a port the OS picks) in a background thread; the client,
in ``legacy`` mode, receives ``ping``, ``roots/list``, ``elicitation/create`` (form and URL
modes) and ``sampling/createMessage`` on each call's POST stream and POSTs its answers, which
its callbacks give (checklist §8.1). A client without a callback declares no capability, so
the server refuses those requests before sending; a callback's ``ErrorData`` reaches the tool
as a ``ClientResponseError``; a ``2026-07-28`` client gets the 2026 refusal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import make_app, make_router
from fastapi import Depends
from mcp import Client
from mcp.client.session import ClientRequestContext
from serving import uvicorn_thread

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx.errors import ClientResponseError

FORM = {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}
URL_MODE = {"mode": "url", "message": "Sign in", "url": "https://example.test/sign-in", "elicitationId": "el-1"}
SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 20}


def build_router() -> McpRouter:
    router = make_router(server_request_timeout_seconds=10)

    async def ask(ctx: Context, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            return {"answer": await ctx.send_request(method, params)}
        except ClientResponseError as exc:
            return {"error": {"code": exc.code, "message": exc.client_message}}

    @router.tool()
    async def ping_client(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Ping the client."""
        return await ask(ctx, "ping")

    @router.tool()
    async def client_roots(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """List the client's roots."""
        return await ask(ctx, "roots/list")

    @router.tool()
    async def ask_name(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Ask the user's name (form mode)."""
        return await ask(ctx, "elicitation/create", FORM)

    @router.tool()
    async def sign_in(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Send the user to a URL (URL mode)."""
        return await ask(ctx, "elicitation/create", URL_MODE)

    @router.tool()
    async def sample(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Ask the client's model."""
        return await ask(ctx, "sampling/createMessage", SAMPLE)

    @router.tool()
    async def everything(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Ask three things at once on one stream."""
        results: dict[str, Any] = {}

        async def one(key: str, method: str, params: dict[str, Any] | None = None) -> None:
            results[key] = await ctx.send_request(method, params)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "ping", "ping")
            tg.start_soon(one, "roots", "roots/list")
            tg.start_soon(one, "name", "elicitation/create", FORM)
        return results

    return router


ROUTER = build_router()


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with uvicorn_thread(make_app(ROUTER)) as url:
        yield url


SEEN: list[Any] = []


async def on_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
    SEEN.append(("roots", ctx.request_id))
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])


async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    SEEN.append(("elicit", type(params).__name__))
    if isinstance(params, types.ElicitRequestFormParams):
        return types.ElicitResult(action="accept", content={"name": "Ada"})
    return types.ElicitResult(action="accept")


async def on_sample(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    SEEN.append(("sample", params.max_tokens))
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="hi!"), model="test-model")


async def refuse_roots(ctx: ClientRequestContext) -> types.ErrorData:
    return types.ErrorData(code=-32603, message="no roots for you")


def structured(result: types.CallToolResult) -> Any:
    assert result.is_error is False, result.content
    return result.structured_content


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()


async def test_the_client_answers_every_request_kind(server_url: str) -> None:
    with anyio.fail_after(30):
        async with Client(
            server_url,
            mode="legacy",
            cache=None,
            list_roots_callback=on_roots,
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
        ) as client:
            assert structured(await client.call_tool("ping_client", {})) == {"answer": {}}
            assert structured(await client.call_tool("client_roots", {})) == {
                "answer": {"roots": [{"uri": "file:///work/project", "name": "project"}]}
            }
            assert structured(await client.call_tool("ask_name", {})) == {"answer": {"action": "accept", "content": {"name": "Ada"}}}
            assert structured(await client.call_tool("sign_in", {})) == {"answer": {"action": "accept"}}
            sampled = structured(await client.call_tool("sample", {}))["answer"]
            assert sampled["content"] == {"type": "text", "text": "hi!"} and sampled["model"] == "test-model"
            together = structured(await client.call_tool("everything", {}))
            assert together == {
                "ping": {},
                "roots": {"roots": [{"uri": "file:///work/project", "name": "project"}]},
                "name": {"action": "accept", "content": {"name": "Ada"}},
            }
    assert ("elicit", "ElicitRequestURLParams") in SEEN and ("sample", 20) in SEEN
    roots_ids = [rid for kind, rid in SEEN if kind == "roots"]
    assert all(isinstance(rid, str) for rid in roots_ids) and len(set(roots_ids)) == len(roots_ids)
    assert len(ROUTER.pending) == 0


async def test_a_client_without_callbacks_is_asked_nothing_but_ping(server_url: str) -> None:
    with anyio.fail_after(30):
        async with Client(server_url, mode="legacy", cache=None) as client:
            assert structured(await client.call_tool("ping_client", {})) == {"answer": {}}
            for tool, capability in (("client_roots", "roots"), ("ask_name", "elicitation.form"), ("sample", "sampling")):
                result = await client.call_tool(tool, {})
                assert result.is_error is True and capability in text(result), text(result)
    assert len(ROUTER.pending) == 0


async def test_an_error_from_a_callback_reaches_the_tool(server_url: str) -> None:
    with anyio.fail_after(30):
        async with Client(server_url, mode="legacy", cache=None, list_roots_callback=refuse_roots) as client:
            assert structured(await client.call_tool("client_roots", {})) == {"error": {"code": -32603, "message": "no roots for you"}}


async def test_a_2026_client_gets_the_2026_refusal(server_url: str) -> None:
    with anyio.fail_after(30):
        async with Client(server_url, mode="2026-07-28", cache=None, list_roots_callback=on_roots) as client:
            result = await client.call_tool("client_roots", {})
    assert result.is_error is True and "2026-07-28 era has no server→client requests" in text(result)
    assert SEEN == []


async def test_the_guide_example_runs_as_written() -> None:
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text(encoding="utf-8")
    section = guide[guide.index("## Asking the client (2025 era)") : guide.index("## Session modes")]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    namespace: dict[str, Any] = {"__name__": "guide_asking_the_client"}
    exec(compile(match.group(1), "docs/guide.md", "exec"), namespace)  # noqa: S102
    app = namespace["app"]  # the example's own app (`uvicorn module:app`)
    with uvicorn_thread(app) as url, anyio.fail_after(30):
        async with Client(url, mode="legacy", cache=None, list_roots_callback=on_roots) as client:
            assert structured(await client.call_tool("project_roots", {})) == {"result": ["file:///work/project"]}
        async with Client(url, mode="legacy", cache=None, list_roots_callback=refuse_roots) as client:
            assert structured(await client.call_tool("project_roots", {})) == {"result": ["error -32603: no roots for you"]}
        async with Client(url, mode="legacy", cache=None) as client:  # no roots declared
            assert structured(await client.call_tool("project_roots", {})) == {"result": []}
        async with Client(url, mode="2026-07-28", cache=None, list_roots_callback=on_roots) as client:
            assert structured(await client.call_tool("project_roots", {})) == {"result": []}
