"""The official MCP client (``mcp`` 2.3) completes elicitation, sampling and roots rounds in both
modes against tools written once (``examples/input_required.py``): ``legacy`` gets real
server→client requests on each call's stream, ``2026-07-28`` gets ``input_required`` results
and retries with ``inputResponses`` and the sealed ``requestState`` (its callbacks answer
either way). The three-question wizard completes in three rounds, over HTTP and over stdio.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import make_router
from fastapi import Depends, FastAPI
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from serving import uvicorn_thread
from stdio_wire import STDIO_COMMAND, server_env

from examples.input_required import router as example_router
from fastapi_mcp_ctx import Context, mcp_context

MODES = ["legacy", "2026-07-28"]
REPO = Path(__file__).resolve().parents[1]
ASKED: list[tuple[str, Any]] = []


def build_app() -> FastAPI:
    extra = make_router()

    @extra.tool()
    async def slow_model(ctx: Context = Depends(mcp_context)) -> str:
        """Asks the client's model, with keep-alive progress every 50 ms while it waits."""
        answer = await ctx.sample("Think slowly", max_tokens=10, progress_interval=0.05)
        return str(getattr(answer.content, "text", ""))

    app = FastAPI()
    app.include_router(example_router)
    app.include_router(extra, prefix="/extra")
    return app


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with uvicorn_thread(build_app()) as url:
        yield url


@pytest.fixture(autouse=True)
def _clear() -> None:
    ASKED.clear()


WIZARD = {"Where do you want to go?": {"city": "Lisbon"}, "How many nights in Lisbon?": {"nights": 3}, "Any extras?": {"breakfast": False}}


async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert isinstance(params, types.ElicitRequestFormParams)
    ASKED.append(("elicit", params.message))
    if params.message in WIZARD:
        return types.ElicitResult(action="accept", content=WIZARD[params.message])
    return types.ElicitResult(action="accept", content={"format": "csv"})


async def on_decline(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def on_sample(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    ASKED.append(("sample", params.max_tokens))
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="short summary"), model="test-model")


async def on_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
    ASKED.append(("roots", None))
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])


def client(url: str, mode: str, **callbacks: Any) -> Client:
    return Client(url, mode=mode, cache=None, **callbacks)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_round(server_url: str, mode: str) -> None:
    with anyio.fail_after(30):
        async with client(server_url, mode, elicitation_callback=on_elicit) as c:
            result = await c.call_tool("export_report", {"report_id": "q3"})
            given = await c.call_tool("export_report", {"report_id": "q3", "format": "json"})
    assert result.is_error is False, result.content
    assert result.structured_content == {"url": "https://reports.example/q3.csv"}
    assert ASKED == [("elicit", "Which format should the report use?")]  # asked once, not for the call that gave it
    assert given.structured_content == {"url": "https://reports.example/q3.json"}


@pytest.mark.parametrize("mode", MODES)
async def test_decline_ends_the_call(server_url: str, mode: str) -> None:
    with anyio.fail_after(30):
        async with client(server_url, mode, elicitation_callback=on_decline) as c:
            result = await c.call_tool("export_report", {"report_id": "q3"})
    assert result.is_error is True
    block = result.content[0]
    assert isinstance(block, types.TextContent) and "decline" in block.text


@pytest.mark.parametrize("mode", MODES)
async def test_three_question_wizard(server_url: str, mode: str) -> None:
    with anyio.fail_after(30):
        async with client(server_url, mode, elicitation_callback=on_elicit) as c:
            result = await c.call_tool("trip_wizard", {})
    assert result.is_error is False, result.content
    assert result.structured_content == {"city": "Lisbon", "nights": 3, "breakfast": False}
    assert [message for _, message in ASKED] == list(WIZARD)  # each question asked exactly once, in order


async def answered_call(url: str, mode: str, tool: str, arguments: dict[str, Any], **callbacks: Any) -> Any:
    """``tool``'s structured result, the client answering with ``callbacks``."""
    with anyio.fail_after(30):
        async with client(url, mode, **callbacks) as c:
            result = await c.call_tool(tool, arguments)
    assert result.is_error is False, result.content
    return result.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_sampling_round(server_url: str, mode: str) -> None:
    assert await answered_call(server_url, mode, "summarize", {"text": "a long text"}, sampling_callback=on_sample) == {"result": "short summary"}
    assert ASKED == [("sample", 100)]


@pytest.mark.parametrize("mode", MODES)
async def test_roots_round(server_url: str, mode: str) -> None:
    roots = await answered_call(server_url, mode, "project_roots", {}, list_roots_callback=on_roots)
    assert roots == {"result": ["file:///work/project"]}
    assert ASKED == [("roots", None)]


async def test_a_2025_client_without_elicitation_gets_the_envelope(server_url: str) -> None:
    with anyio.fail_after(30):
        async with client(server_url, "legacy") as c:
            result = await c.call_tool("export_report", {"report_id": "q3"})
    assert result.is_error is True
    assert result.meta is not None
    error = result.meta["fastapi-mcp-ctx/error"]
    assert error["code"] == -32600 and error["data"]["reason"] == "client_capability_missing"
    assert error["data"]["recovery"]["hint"].endswith("Or call again with format supplied.")


async def test_a_2026_client_without_elicitation_gets_32021(server_url: str) -> None:
    with anyio.fail_after(30):
        async with client(server_url, "2026-07-28") as c:
            with pytest.raises(MCPError) as raised:
                await c.call_tool("export_report", {"report_id": "q3"})
    assert raised.value.error.code == -32021


async def test_sampling_keeps_the_call_alive_with_progress(server_url: str) -> None:
    """mcp-use's keep-alive: while the 2025 client's model works, notifications/progress flow."""
    progress: list[float] = []

    async def slow_sample(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        await anyio.sleep(0.4)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="done"), model="m")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with anyio.fail_after(30):
        async with client(server_url.replace("/mcp", "/extra/mcp"), "legacy", sampling_callback=slow_sample) as c:
            result = await c.call_tool("slow_model", {}, progress_callback=on_progress)
    assert result.structured_content == {"result": "done"}
    assert len(progress) >= 3 and progress == sorted(set(progress))


@pytest.mark.parametrize("mode", MODES)
async def test_the_wizard_over_stdio(mode: str, tmp_path: Path) -> None:
    """The same handlers on stdio: 2025 requests on the connection, 2026 input_required rounds."""
    params = StdioServerParameters(
        command=STDIO_COMMAND[0], args=[*STDIO_COMMAND[1:], "examples.input_required:app"], cwd=REPO, env=server_env()
    )
    with (tmp_path / "client-stderr.txt").open("w") as errlog, anyio.fail_after(30):
        async with Client(stdio_client(params, errlog=errlog), mode=mode, cache=None, elicitation_callback=on_elicit) as c:
            result = await c.call_tool("trip_wizard", {})
    assert result.structured_content == {"city": "Lisbon", "nights": 3, "breakfast": False}
    assert [message for _, message in ASKED] == list(WIZARD)
