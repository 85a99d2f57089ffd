"""Tasks (issue 20) in both eras, in one process: ``tool(task=...)``, the 2026 extension
``io.modelcontextprotocol/tasks`` and the 2025-11-25 task methods, through ``McpTestClient``
(and the official ``mcp`` client for plain calls of task tools). The store's clock is controlled
where time matters (TTL, lease); nothing waits on wall-clock margins."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import asgi_exchange, mcp_settings, modern_meta
from mcp import Client
from notify_app import SUB, frames, listen_headers, wait_frames
from serving import uvicorn_thread
from tasks_app import Confirmation, build_app, events, ready

from fastapi_mcp_ctx.errors import McpResponseError
from fastapi_mcp_ctx.testing import TASKS_CAPABILITY, McpTestClient

EXT = "io.modelcontextprotocol/tasks"
ROOT = Path(__file__).resolve().parents[1]


def modern(app: Any, **kwargs: Any) -> McpTestClient:
    caps = {"elicitation": {}, **TASKS_CAPABILITY}
    return McpTestClient(app, era="modern", client_capabilities=caps, **kwargs)


class Clock:
    """A controlled store clock (ms)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


def clocked(**settings: Any) -> tuple[Any, Clock]:
    """An app whose task store runs on a controlled clock."""
    app, clock = build_app(mcp_settings(**settings)), Clock()
    ready(app).tasks.store.clock = clock  # type: ignore[attr-defined]
    return app, clock


@pytest.fixture
def app() -> Any:
    return build_app(mcp_settings())


# -- 2026-07-28 ----------------------------------------------------------------------------
async def test_modern_task_is_created_polled_and_completed(app: Any) -> None:
    async with modern(app) as client:
        created = await client.call_tool_as_task("sleeper", {"seconds": 0.05})
        assert created["status"] == "working" and created["ttlMs"] == 3_600_000 and "requestState" not in created
        right_after = await client.get_task(created["taskId"])  # durable before the answer
        assert right_after["taskId"] == created["taskId"]
        done = await client.wait_task(created["taskId"])
        assert done["status"] == "completed", done
        assert done["result"]["content"][0]["text"] == "slept 0.05 s on one"
        assert "_meta" not in done["result"]


async def test_modern_without_the_extension_runs_a_plain_call_and_refuses_required(app: Any) -> None:
    async with McpTestClient(app, era="modern") as client:
        plain = await client.call_tool("sleeper", {"seconds": 0})
        assert plain.text == "slept 0 s on one" and "taskId" not in plain.result
        with pytest.raises(McpResponseError) as refused:
            await client.call_tool("only_task", {})
        assert refused.value.code == -32021
        assert refused.value.data["requiredCapabilities"] == {"extensions": {EXT: {}}}
        with pytest.raises(McpResponseError) as gated:
            await client.request("tasks/get", {"taskId": "x"})
        assert gated.value.code == -32021
        tools = await client.list_tools()
        assert all("execution" not in tool for tool in tools)  # 2025-11-25's field


async def test_modern_cancel_stops_the_handler_and_is_idempotent(app: Any) -> None:
    async with modern(app) as client:
        created = await client.call_tool_as_task("sleeper", {"seconds": 60})
        task_id = created["taskId"]
        with anyio.fail_after(5):
            while f"started {task_id}" not in events():
                await anyio.sleep(0.01)
        assert await client.cancel_task(task_id) == {"resultType": "complete", "_meta": ack_meta(client)}
        assert (await client.get_task(task_id))["status"] == "cancelled"
        with anyio.fail_after(5):
            while f"cancelled {task_id}" not in events():  # the handler saw its cancellation
                await anyio.sleep(0.01)
        assert (await client.cancel_task(task_id))["resultType"] == "complete"  # terminal: the same ack
        assert (await client.get_task(task_id))["status"] == "cancelled"


def ack_meta(client: McpTestClient) -> dict[str, Any]:
    router = client.router
    assert router is not None
    return {
        "io.modelcontextprotocol/serverInfo": {"name": router.settings.server_name, "version": router.settings.server_version}
    }


async def test_modern_input_required_resumes_on_update(app: Any) -> None:
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("asks"))["taskId"]
        waiting = await client.wait_task(task_id, until="input_required")
        (key,) = waiting["inputRequests"]
        assert waiting["inputRequests"][key]["method"] == "elicitation/create"
        await client.update_task(task_id, {"unknown": {"action": "accept", "content": {}}})  # ignored
        assert (await client.get_task(task_id))["status"] == "input_required"
        await client.update_task(task_id, {key: {"action": "accept", "content": {"confirm": True}}})
        done = await client.wait_task(task_id)
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "confirmed"


async def test_modern_protocol_error_fails_the_task(app: Any) -> None:
    async with modern(app) as client:
        done = await client.wait_task((await client.call_tool_as_task("broken"))["taskId"])
        assert done["status"] == "failed" and done["error"]["code"] == -32603 and "result" not in done


async def test_unknown_task_is_invalid_params(app: Any) -> None:
    async with modern(app) as client:
        for method in ("tasks/get", "tasks/cancel"):
            with pytest.raises(McpResponseError) as unknown:
                await client.request(method, {"taskId": "no-such-task"})
            assert unknown.value.code == -32602
        for removed in ("tasks/result", "tasks/list"):
            with pytest.raises(McpResponseError) as gone:
                await client.request(removed, {"taskId": "x"})
            assert gone.value.code == -32601


# -- owner, bounds, TTL, lease -------------------------------------------------------------
async def test_another_tenant_or_subject_does_not_find_the_task() -> None:
    app = build_app(mcp_settings(), authenticated=True)
    async with modern(app, headers={"X-User": "alice", "X-Tenant": "acme"}) as alice:
        task_id = (await alice.call_tool_as_task("sleeper", {"seconds": 0}))["taskId"]
        assert (await alice.wait_task(task_id))["status"] == "completed"
    for who in ({"X-User": "alice", "X-Tenant": "globex"}, {"X-User": "bob", "X-Tenant": "acme"}, {"X-User": "alice"}):
        async with modern(app, headers=who) as other:
            for method in ("tasks/get", "tasks/cancel"):
                with pytest.raises(McpResponseError) as hidden:
                    await other.request(method, {"taskId": task_id})
                assert hidden.value.code == -32602 and hidden.value.data["reason"] == "task_not_found"


async def test_ttl_expiry_deletes_the_record() -> None:
    app, clock = clocked(task_ttl_ms=60_000)
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("only_task", {"size": 3}))["taskId"]
        assert (await client.wait_task(task_id))["status"] == "completed"
        clock.now += 59_999
        assert (await client.get_task(task_id))["result"]["content"][0]["text"] == "xxx"
        clock.now += 1
        with pytest.raises(McpResponseError) as expired:
            await client.get_task(task_id)
        assert expired.value.code == -32602


async def test_a_lapsed_lease_reads_failed() -> None:
    app, clock = clocked(task_lease_seconds=30)
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("sleeper", {"seconds": 60}))["taskId"]
        assert (await client.get_task(task_id))["status"] == "working"
        clock.now += 30_001  # no renewal came (its period is 10 s of real time)
        lost = await client.get_task(task_id)
        assert lost["status"] == "failed" and lost["error"]["data"]["reason"] == "task_lost"
        await client.cancel_task(task_id)  # the handler still sleeping here is told to stop


async def test_per_owner_bound() -> None:
    app = build_app(mcp_settings(max_tasks_per_owner=2))
    async with modern(app) as client:
        for _ in range(2):
            await client.call_tool_as_task("only_task")
        with pytest.raises(McpResponseError) as bounded:
            await client.call_tool_as_task("only_task")
        assert bounded.value.code == -32600 and bounded.value.http_status == 429
        assert bounded.value.data["reason"] == "task_quota_exceeded"


async def test_a_result_over_the_size_bound_fails_the_task() -> None:
    app = build_app(mcp_settings(task_max_result_bytes=1024))
    async with modern(app) as client:
        small = await client.wait_task((await client.call_tool_as_task("only_task", {"size": 100}))["taskId"])
        assert small["status"] == "completed"
        big = await client.wait_task((await client.call_tool_as_task("only_task", {"size": 2000}))["taskId"])
        assert big["status"] == "failed" and big["error"]["data"]["reason"] == "task_result_too_large"


async def test_shutdown_ends_running_tasks_failed_and_refuses_new_ones() -> None:
    app = build_app(mcp_settings(shutdown_grace_seconds=0.2))
    router = ready(app)
    async with modern(app) as client:
        task_id = (await client.call_tool_as_task("sleeper", {"seconds": 60}))["taskId"]
        with anyio.fail_after(5):
            while f"started {task_id}" not in events():
                await anyio.sleep(0.01)
        with anyio.fail_after(10):
            await router.shutdown()
        ended = await client.get_task(task_id)
        assert ended["status"] == "failed" and ended["error"]["data"]["reason"] == "server_shut_down"
        with pytest.raises(McpResponseError) as refused:
            await client.call_tool_as_task("sleeper", {"seconds": 1})
        assert refused.value.http_status == 503


# -- 2025-11-25 ----------------------------------------------------------------------------
async def test_legacy_task_lifecycle(app: Any) -> None:
    async with McpTestClient(app) as client:
        assert client.initialize_result is not None
        assert client.initialize_result["capabilities"]["tasks"] == {
            "list": {},
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
        tools = {t["name"]: t for t in await client.list_tools()}
        assert tools["sleeper"]["execution"] == {"taskSupport": "optional"} and "execution" not in tools["plain"]
        task = await client.call_tool_as_task("sleeper", {"seconds": 0.05}, ttl_ms=120_000)
        assert task["status"] == "working" and task["ttl"] == 120_000
        assert (await client.get_task(task["taskId"]))["taskId"] == task["taskId"]
        result = await client.task_result(task["taskId"])  # blocks until terminal
        assert result["content"][0]["text"] == "slept 0.05 s on one"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        assert [t["taskId"] for t in await client.list_tasks()] == [task["taskId"]]
        with pytest.raises(McpResponseError) as terminal:
            await client.cancel_task(task["taskId"])
        assert terminal.value.code == -32602
        running = await client.call_tool_as_task("sleeper", {"seconds": 60})
        assert (await client.cancel_task(running["taskId"]))["status"] == "cancelled"
        plain = await client.call_tool("sleeper", {"seconds": 0})  # no task asked: a plain call
        assert plain.text == "slept 0 s on one"
    async with McpTestClient(app) as other:  # another anonymous session: its own tasks only
        assert await other.list_tasks() == []


async def test_legacy_refusals(app: Any) -> None:
    async with McpTestClient(app) as client:
        with pytest.raises(McpResponseError) as not_a_task:
            await client.call_tool_as_task("plain")  # no execution.taskSupport: -32601 (SHOULD)
        assert not_a_task.value.code == -32601
        with pytest.raises(McpResponseError) as required:
            await client.call_tool("only_task", {})
        assert required.value.code == -32601
        with pytest.raises(McpResponseError) as ttl:
            await client.call_tool_as_task("sleeper", {"seconds": 0}, ttl_ms=10)
        assert ttl.value.code == -32602 and ttl.value.data["reason"] == "task_ttl_out_of_range"
        failed = await client.call_tool_as_task("broken")
        with pytest.raises(McpResponseError) as error:
            await client.task_result(failed["taskId"])
        assert error.value.code == -32603


async def test_legacy_task_asks_through_tasks_result(app: Any) -> None:
    """2025: the task's question goes to the client on the tasks/result stream (related-task)."""
    async with McpTestClient(app, elicitation=lambda params: Confirmation(confirm=True)) as client:
        task = await client.call_tool_as_task("asks")
        result = await client.task_result(task["taskId"])
        assert result["content"][0]["text"] == "confirmed"
        assert (await client.get_task(task["taskId"]))["status"] == "completed"


# -- known faults ---------------------------------------------------------------------------
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_b09_a_task_keeps_the_request_principal_and_dependencies(era: str) -> None:
    """B09 (fastmcp #3095): a tool run as a task still gets its request's dependencies and principal."""
    app = build_app(mcp_settings(), authenticated=True)
    headers = {"X-User": "alice", "X-Tenant": "acme", "Authorization": "Bearer token-a"}
    client = modern(app, headers=headers) if era == "modern" else McpTestClient(app, headers=headers)
    async with client:
        task_id = (await client.call_tool_as_task("whoami"))["taskId"]
        if era == "modern":
            result = (await client.wait_task(task_id))["result"]
        else:
            result = await client.task_result(task_id)
        assert result["structuredContent"] == {"token": "Bearer token-a", "subject": "alice", "tenant": "acme"}


# -- the official client: task tools still called normally ---------------------------------
@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with uvicorn_thread(build_app(mcp_settings())) as url:
        yield url


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_official_client_calls_task_tools_normally(served: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with Client(served, mode=mode, cache=None) as client:
            result = await client.call_tool("sleeper", {"seconds": 0})
            assert result.content[0].text == "slept 0 s on one"  # type: ignore[union-attr]
            assert (await client.call_tool("plain", {})).content[0].text == "plain"  # type: ignore[union-attr]


# -- docs/tasks.md: its code is this test's -------------------------------------------------
DOC_FENCE = re.compile(r'^```(\w*)(?: title="([^"]+)")?\n(.*?)^```', re.DOTALL | re.MULTILINE)
VOLATILE = {"taskId": "<id>", "createdAt": "<time>", "lastUpdatedAt": "<time>"}


def _normal(value: Any) -> Any:
    """``value`` with ids and times replaced and the serverInfo ``_meta`` left out."""
    if isinstance(value, dict):
        out = {
            k: VOLATILE.get(k, _normal(v))
            for k, v in value.items()
            if k != "_meta" or set(v) != {"io.modelcontextprotocol/serverInfo"}
        }
        return out
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


async def test_the_tasks_guide_shows_what_the_example_answers() -> None:
    from examples import tasks as example

    blocks = {
        title: (lang, code) for lang, title, code in DOC_FENCE.findall((ROOT / "docs" / "tasks.md").read_text(encoding="utf-8"))
    }
    assert blocks["examples/tasks.py"][1] == (ROOT / "examples" / "tasks.py").read_text(encoding="utf-8")
    shown = {title: json.loads(code) for title, (lang, code) in blocks.items() if lang == "json"}
    seen: dict[str, Any] = {}
    async with McpTestClient(example.app, era="modern", client_capabilities={"elicitation": {}, **TASKS_CAPABILITY}) as client:
        created = (await client.request("tools/call", {"name": "build_report", "arguments": {"pages": 3}})).result
        seen["2026: tools/call build_report"] = created
        seen["2026: tasks/get, completed"] = await client.wait_task(created["taskId"])
        purge = await client.call_tool_as_task("purge")
        seen["2026: tasks/get, input_required"] = await client.wait_task(purge["taskId"], until="input_required")
        await client.update_task(purge["taskId"], {"elicit-1": {"action": "accept", "content": {"confirm": True}}})
        assert (await client.wait_task(purge["taskId"]))["result"]["content"][0]["text"] == "archive purged"
    async with McpTestClient(example.app) as legacy:
        task = await legacy.call_tool_as_task("build_report", {"pages": 3}, ttl_ms=600_000)  # the result's "task"
        seen["2025: tools/call build_report with task"] = {"task": task}
        result = await legacy.task_result(task["taskId"])
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] = "<id>"
        seen["2025: tasks/result"] = result
    assert set(shown) == set(seen)
    for title, value in shown.items():
        if title == "2025: tasks/result":
            value["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] = "<id>"
        assert _normal(value) == _normal(seen[title]), title


async def test_memory_tasks_under_several_workers_are_refused(monkeypatch: pytest.MonkeyPatch, app: Any) -> None:
    """``serve --workers 2`` with the memory store: a task would be unknown to the other worker."""
    monkeypatch.setenv("FASTAPI_MCP_CTX_SERVE_WORKERS", "2")
    async with modern(app) as client:
        with pytest.raises(McpResponseError) as refused:
            await client.call_tool_as_task("sleeper", {"seconds": 0})
        assert refused.value.http_status == 500 and "MCP_SESSION_STORE_URL=redis://" in refused.value.message


# -- notifications/tasks on subscriptions/listen (2026) -------------------------------------
def listen_request(request_id: Any, task_ids: list[str], capabilities: dict[str, Any]) -> bytes:
    body = {"_meta": modern_meta(capabilities=capabilities), "notifications": {"taskIds": task_ids}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": body}).encode()


async def test_listen_for_a_task_hears_its_status_and_other_owners_hear_nothing() -> None:
    app = build_app(mcp_settings(), authenticated=True)
    alice = {"x-user": "alice", "x-tenant": "acme"}
    async with modern(app, headers=alice) as client:
        task_id = (await client.call_tool_as_task("asks"))["taskId"]
        await client.wait_task(task_id, until="input_required")
        own = asgi_exchange(
            app, "POST", headers={**listen_headers(), **alice}, body_chunks=[listen_request("l1", [task_id], TASKS_CAPABILITY)]
        )
        guess = asgi_exchange(
            app,
            "POST",
            headers={**listen_headers(), "x-user": "mallory", "x-tenant": "acme"},
            body_chunks=[listen_request("l2", [task_id], TASKS_CAPABILITY)],
        )
        async with own as mine, guess as theirs:
            await wait_frames(mine, 1)
            await wait_frames(theirs, 1)
            assert frames(mine)[0]["params"]["notifications"] == {"taskIds": [task_id]}
            await client.update_task(task_id, {"elicit-1": {"action": "accept", "content": {"confirm": True}}})
            await client.wait_task(task_id)
            await mine.wait_for(lambda e: any(f.get("params", {}).get("status") == "completed" for f in frames(e)), 10)
            heard = frames(mine)
        statuses = [f["params"]["status"] for f in heard[1:] if f.get("method") == "notifications/tasks"]
        assert statuses[-1] == "completed" and heard[-1]["params"]["result"]["content"][0]["text"] == "confirmed"
        assert all(f["params"]["taskId"] == task_id and f["params"]["_meta"][SUB] == "l1" for f in heard[1:])
        assert [f.get("method") for f in frames(theirs)] == ["notifications/subscriptions/acknowledged"]


async def test_listen_for_tasks_without_the_extension_is_refused(app: Any) -> None:
    async with asgi_exchange(app, "POST", headers=listen_headers(), body_chunks=[listen_request(1, ["t"], {})]) as refused:
        await refused.wait_for(lambda e: e.done.is_set())
    assert json.loads(refused.body)["error"]["code"] == -32021


async def test_tasks_over_stdio_in_both_eras(tmp_path: Path) -> None:
    """The same engine on stdio (the dispatcher's transport-neutral serve): 2025 and 2026."""
    from stdio_wire import spawn

    async with spawn(tmp_path, app="tasks_app:app") as server:
        await server.initialize("2025-11-25")
        created = await server.request("tools/call", {"name": "sleeper", "arguments": {"seconds": 0}, "task": {"ttl": 60_000}}, 2)
        task_id = created["result"]["task"]["taskId"]
        result = await server.request("tasks/result", {"taskId": task_id}, 3)
        assert result["result"]["content"][0]["text"] == "slept 0 s on one"
    async with spawn(tmp_path, app="tasks_app:app") as server:  # a 2026 connection
        meta = modern_meta(capabilities=TASKS_CAPABILITY)
        modern_created = await server.request("tools/call", {"name": "sleeper", "arguments": {"seconds": 0}, "_meta": meta}, 4)
        assert modern_created["result"]["resultType"] == "task"
        modern_id = modern_created["result"]["taskId"]
        with anyio.fail_after(10):
            while (got := await server.request("tasks/get", {"taskId": modern_id, "_meta": meta}, 5))["result"][
                "status"
            ] != "completed":
                await anyio.sleep(0.02)
        assert got["result"]["result"]["content"][0]["text"] == "slept 0 s on one"


async def test_b60_stdio_exits_on_eof_with_a_task_running(tmp_path: Path) -> None:
    """B60: a running task (a 60 s sleep) does not keep a stdio server alive after stdin's EOF."""
    from stdio_wire import spawn

    async with spawn(tmp_path, app="tasks_app:app") as server:
        await server.initialize("2025-11-25")
        created = await server.request("tools/call", {"name": "sleeper", "arguments": {"seconds": 60}, "task": {}}, 2)
        assert created["result"]["task"]["status"] == "working"
        await server.close_stdin()
        assert await server.wait(timeout=30) == 0
