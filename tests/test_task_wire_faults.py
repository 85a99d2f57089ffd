"""Faults of the tasks wire found by review (issue 20 follow-up): who may list an anonymous
caller's tasks, malformed ``tasks/update`` answers, ``serve --workers`` with the memory task
store, ``McpTestClient.call_tool`` answered with a task, and per-reason hints. Each test failed
before its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import mcp_settings
from tasks_app import build_app

from fastapi_mcp_ctx._server.task_calls import MAX_INPUT_RESPONSES, task_answers
from fastapi_mcp_ctx._tasks.records import TaskRecord
from fastapi_mcp_ctx.cli import cli
from fastapi_mcp_ctx.errors import InvalidParamsError, McpResponseError, TestClientTaskError
from fastapi_mcp_ctx.testing import TASKS_CAPABILITY, McpTestClient

SHARED_KEY = "k" * 43  # a base64url request-state key shared by the workers (32 bytes)


def modern(app: Any) -> McpTestClient:
    return McpTestClient(app, era="modern", client_capabilities={"elicitation": {}, **TASKS_CAPABILITY})


# -- 1. anonymous callers --------------------------------------------------------------------
async def test_a_caller_without_identity_or_session_lists_no_other_anonymous_callers_task() -> None:
    """A 2025 client without a session (stateless mode) used to share the one anonymous owner
    with every anonymous 2026 caller: its tasks/list showed the victim's taskId."""
    app = build_app(mcp_settings(session_mode="stateless"))
    async with modern(app) as victim:
        victim_task = (await victim.call_tool_as_task("sleeper", {"seconds": 0}))["taskId"]
        assert (await victim.wait_task(victim_task))["status"] == "completed"
    async with McpTestClient(app) as sessionless:
        assert await sessionless.list_tasks() == []
        own = await sessionless.call_tool_as_task("sleeper", {"seconds": 0})
        assert await sessionless.list_tasks() == []  # not even its own: nothing binds them to it
        assert (await sessionless.task_result(own["taskId"]))["content"][0]["text"] == "slept 0 s on one"


async def test_anonymous_2025_sessions_each_have_their_own_task_quota() -> None:
    app = build_app(mcp_settings(max_tasks_per_owner=1))
    async with McpTestClient(app) as first, McpTestClient(app) as second:
        mine = await first.call_tool_as_task("sleeper", {"seconds": 0})
        with pytest.raises(McpResponseError) as full:
            await first.call_tool_as_task("sleeper", {"seconds": 0})
        assert full.value.data["reason"] == "task_quota_exceeded"
        theirs = await second.call_tool_as_task("sleeper", {"seconds": 0})  # another session: its own bound
        assert [t["taskId"] for t in await second.list_tasks()] == [theirs["taskId"]]
        assert [t["taskId"] for t in await first.list_tasks()] == [mine["taskId"]]


# -- 2. tasks/update inputResponses ----------------------------------------------------------
@pytest.mark.parametrize(
    "answer",
    [
        {"action": "bogus"},
        {"action": "accept", "content": "x"},
        {"action": "accept", "content": {"confirm": {"nested": 1}}},
        "accept",
        {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},  # a sampling result
    ],
)
async def test_a_malformed_task_answer_is_invalid_params_and_the_question_stays_pending(answer: Any) -> None:
    app = build_app(mcp_settings())
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("asks"))["taskId"]
        (key,) = (await client.wait_task(task_id, until="input_required"))["inputRequests"]
        with pytest.raises(McpResponseError) as refused:
            await client.update_task(task_id, {key: answer})
        assert refused.value.code == -32602 and refused.value.http_status == 400
        assert refused.value.data["reason"] == "invalid_input_response" and refused.value.data["key"] == key
        still = await client.get_task(task_id)
        assert still["status"] == "input_required" and key in still["inputRequests"]
        await client.update_task(task_id, {key: {"action": "accept", "content": {"confirm": True}}})
        done = await client.wait_task(task_id)
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "confirmed"


async def test_task_answers_are_bounded_in_count_and_size() -> None:
    app = build_app(mcp_settings(request_state_max_bytes=1024))
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("asks"))["taskId"]
        (key,) = (await client.wait_task(task_id, until="input_required"))["inputRequests"]
        flood = {f"k{i}": {"action": "cancel"} for i in range(MAX_INPUT_RESPONSES + 1)}
        with pytest.raises(McpResponseError) as many:
            await client.update_task(task_id, flood)
        assert many.value.code == -32602 and many.value.data["reason"] == "too_many_input_responses"
        big = {"action": "accept", "content": {"confirm": True, "note": "x" * 2000}}
        with pytest.raises(McpResponseError) as large:
            await client.update_task(task_id, {key: big})
        assert large.value.data["reason"] == "input_responses_too_large"
        assert (await client.get_task(task_id))["status"] == "input_required"


def test_task_answers_keep_only_asked_keys_checked_against_their_method() -> None:
    """One rule for 2026 tasks/update and the 2025 tasks/result relay (``task_answers``)."""
    record = TaskRecord("t", "o", "input_required", 0, 0, 1000, 1000)
    record.input_requests = {
        "e": {"method": "elicitation/create", "params": {}},
        "s": {"method": "sampling/createMessage", "params": {}},
        "r": {"method": "roots/list", "params": {}},
    }
    sample = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    kept = task_answers(record, {"e": {"action": "decline"}, "s": sample, "r": {"roots": []}, "never": {"action": "cancel"}}, mcp_settings())
    assert kept == {"e": {"action": "decline"}, "s": sample, "r": {"roots": []}}
    for key, bad in (("s", {"action": "accept"}), ("r", {"roots": "no"}), ("e", {"roots": []})):
        with pytest.raises(InvalidParamsError):
            task_answers(record, {key: bad}, mcp_settings())


# -- 3. serve --workers with the memory task store --------------------------------------------
def test_serve_with_workers_refuses_memory_tasks_even_stateless(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import uvicorn

    (tmp_path / "task_app.py").write_text(
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter, McpSettings\n"
        f"settings = McpSettings(session_mode='stateless', request_state_key={SHARED_KEY!r})\n"
        "router = McpRouter(settings=settings)\n"
        "@router.tool(task='optional')\n"
        "async def report() -> str:\n"
        "    return 'done'\n"
        "app = FastAPI()\n"
        "app.include_router(router)\n"
    )
    monkeypatch.delenv("MCP_SESSION_STORE_URL", raising=False)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: pytest.fail("uvicorn must not start"))
    result = CliRunner().invoke(cli, ["serve", "task_app:app", "--app-dir", str(tmp_path), "--workers", "2"])
    assert result.exit_code == 2, result.output
    assert "task records" in result.output and "MCP_SESSION_STORE_URL=redis://" in result.output


# -- 4. McpTestClient.call_tool answered with a task -----------------------------------------
async def test_call_tool_answered_with_a_task_raises_pointing_to_call_tool_as_task() -> None:
    app = build_app(mcp_settings())
    async with modern(app) as client:
        with pytest.raises(TestClientTaskError, match="call_tool_as_task"):
            await client.call_tool("sleeper", {"seconds": 0})
    async with McpTestClient(app, era="modern") as plain:  # no extension: a plain call, as before
        assert (await plain.call_tool("sleeper", {"seconds": 0})).text == "slept 0 s on one"


# -- 5. hints --------------------------------------------------------------------------------
async def test_tasks_result_of_a_cancelled_task_has_its_own_hint() -> None:
    app = build_app(mcp_settings())
    async with McpTestClient(app) as client:
        task = await client.call_tool_as_task("sleeper", {"seconds": 60})
        await client.cancel_task(task["taskId"])
        with pytest.raises(McpResponseError) as cancelled:
            await client.task_result(task["taskId"])
        assert cancelled.value.data["reason"] == "task_cancelled"
        hint = cancelled.value.data["recovery"]["hint"]
        assert "cancelled" in hint and "Check the taskId" not in hint and "ttlMs" not in hint
        with pytest.raises(McpResponseError) as unknown:
            await client.get_task("no-such-task")
        assert "Check the taskId" in unknown.value.data["recovery"]["hint"]


# -- 6. the stored error names its request ---------------------------------------------------
async def test_a_result_too_large_error_names_the_creating_request() -> None:
    app = build_app(mcp_settings(task_max_result_bytes=1024))
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("only_task", {"size": 2000}))["taskId"]
        call_id = client._next_id  # pyright: ignore[reportPrivateUsage]  # the id the tools/call was sent with
        big = await client.wait_task(task_id)
        assert big["status"] == "failed" and big["error"]["data"]["reason"] == "task_result_too_large"
        assert big["error"]["data"]["requestId"] == call_id


async def test_a_malformed_2025_answer_on_the_tasks_result_stream_is_not_recorded() -> None:
    """2025: a malformed answer on the tasks/result stream is never recorded: the session refuses
    it against the 2025 schema, and ``task_answers`` checks it again before the store. The
    question stays pending until the handler's own timeout. (A guard: this path held before.)"""
    app = build_app(mcp_settings(server_request_timeout_seconds=1.0))
    asked: list[dict[str, Any]] = []

    def bogus(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "bogus"}

    async with McpTestClient(app, elicitation=bogus, validate=False) as client:
        task = await client.call_tool_as_task("asks")
        result = await client.task_result(task["taskId"])
        text = result["content"][0]["text"]
        assert len(asked) == 1 and result["isError"] is True
        assert "not one this request can accept" not in text and "did not answer" in text, text
