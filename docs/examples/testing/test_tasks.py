import pytest
from fastapi import FastAPI

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx.testing import TASKS_CAPABILITY, McpTestClient

mcp_router = McpRouter()


@mcp_router.tool(task="optional")
async def build_report(pages: int) -> str:
    """A long call: a task when the client opts in."""
    return f"report of {pages} pages"


app = FastAPI()
app.include_router(mcp_router)


async def test_a_2026_task_is_polled_to_its_result() -> None:
    async with McpTestClient(app, era="modern", client_capabilities=TASKS_CAPABILITY) as client:
        task = await client.call_tool_as_task("build_report", {"pages": 3})
        assert task["resultType"] == "task" and task["status"] == "working"
        done = await client.wait_task(task["taskId"])
        assert done["status"] == "completed"
        assert done["result"]["structuredContent"] == {"result": "report of 3 pages"}


async def test_a_2025_task_result_blocks_until_done() -> None:
    async with McpTestClient(app) as client:
        task = await client.call_tool_as_task("build_report", {"pages": 2}, ttl_ms=60_000)
        result = await client.task_result(task["taskId"])
        assert result["structuredContent"] == {"result": "report of 2 pages"}
        assert [t["taskId"] for t in await client.list_tasks()] == [task["taskId"]]


async def test_call_tool_refuses_a_task_answer() -> None:
    async with McpTestClient(app, era="modern", client_capabilities=TASKS_CAPABILITY) as client:
        with pytest.raises(Exception, match="call_tool_as_task"):  # TestClientTaskError
            await client.call_tool("build_report", {"pages": 1})
