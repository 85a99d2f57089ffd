"""JSON-RPC batches in sessions negotiated at 2025-03-26 (known fault B17, second half).

2025-03-26 ``basic`` §Batching: implementations MUST support receiving batches; its
``basic/transports`` lets a POST body be an array of requests/notifications or of responses;
``basic/lifecycle``: initialize MUST NOT be part of a batch. JSON-RPC 2.0 §6 shapes the
answer. Every other version (2024-11-05, 2025-06-18, 2025-11-25, 2026-07-28) and a sessionless
request keep the single-message refusal (tests/test_jsonrpc.py holds those of B17 too).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from conftest import (
    ACCEPT_BOTH,
    MODERN,
    Wire,
    asgi_exchange,
    assert_error,
    make_app,
    make_router,
    modern_meta,
    open_client,
    rpc,
    sse_events,
)
from fastapi import Depends, Request
from serving import uvicorn_thread

from fastapi_mcp_ctx import Context, mcp_context

BATCH_VERSION = "2025-03-26"
SINGLE_MESSAGE = "Body must be a single JSON-RPC request or notification object"


class Gate:
    """Lets one tool of a batch wait for another: only concurrent members can finish."""

    def __init__(self) -> None:
        self.opened = anyio.Event()
        self.started = anyio.Event()


def build_app(**settings: Any) -> tuple[Any, Gate]:
    router = make_router(**settings)
    gate = Gate()

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @router.tool()
    async def wait_for_open() -> str:
        """Wait until open_gate ran."""
        with anyio.fail_after(5):
            await gate.opened.wait()
        return "waited"

    @router.tool()
    async def open_gate() -> str:
        """Open the gate."""
        gate.opened.set()
        return "opened"

    @router.tool()
    async def slow(ctx: Context = Depends(mcp_context)) -> str:
        """Report progress, then sleep until cancelled."""
        await ctx.report_progress(1, 2, "half")
        gate.started.set()
        await anyio.sleep(30)
        return "slept"

    entered: list[object] = []
    both_in = anyio.Event()

    async def own_stack(request: Request) -> AsyncIterator[str]:
        """Hold until two members' dependencies are open, then check this one's exit stack is still in its scope."""
        stack = request.scope["fastapi_inner_astack"]
        entered.append(stack)
        if len(entered) == 2:
            both_in.set()
        with anyio.fail_after(5):
            await both_in.wait()
        yield "own" if request.scope["fastapi_inner_astack"] is stack else "other"

    @router.tool()
    async def held(value: str = Depends(own_stack)) -> str:
        """What its yield dependency found."""
        return value

    @router.tool()
    async def own_body(request: Request) -> str:
        """The raw JSON-RPC message this call was given."""
        return json.loads(await request.body())["params"]["name"]

    return make_app(router), gate


@pytest.fixture
def gate_app() -> tuple[Any, Gate]:
    return build_app()


@pytest.fixture
def app(gate_app: tuple[Any, Gate]) -> Any:
    return gate_app[0]


def call(name: str, arguments: dict[str, Any] | None, request_id: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": arguments or {}}, request_id)


async def batch_session(wire: Wire, version: str = BATCH_VERSION) -> dict[str, str]:
    """A session negotiated at ``version``; the headers a 2025-03-26 client sends (no version header)."""
    session = await wire.initialize(version)
    return {"mcp-session-id": session}


def array_of(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.headers["content-type"].startswith("application/json"), response.text
    answer = response.json()
    assert isinstance(answer, list), answer
    return answer


async def test_a_batch_of_requests_is_answered_with_one_array_in_order(wire: Wire) -> None:
    headers = await batch_session(wire)
    body = [call("add", {"a": 1, "b": 2}, 1), rpc("ping", None, "two"), rpc("tools/list", None, 3)]
    response = await wire.post(body, headers)
    assert response.status_code == 200, response.text
    assert response.headers["mcp-session-id"] == headers["mcp-session-id"]
    answers = array_of(response)
    assert [a["id"] for a in answers] == [1, "two", 3]
    assert answers[0]["result"]["structuredContent"] == {"result": 3}
    assert answers[1]["result"] == {}
    assert "add" in [t["name"] for t in answers[2]["result"]["tools"]]


async def test_the_members_run_concurrently(wire: Wire) -> None:
    """wait_for_open finishes only if open_gate, later in the array, runs meanwhile."""
    headers = await batch_session(wire)
    with anyio.fail_after(10):
        response = await wire.post([call("wait_for_open", None, 1), call("open_gate", None, 2)], headers)
    answers = array_of(response)
    assert [a["result"]["structuredContent"]["result"] for a in answers] == ["waited", "opened"]


async def test_the_version_header_of_the_session_is_accepted_too(wire: Wire) -> None:
    headers = {**await batch_session(wire), "mcp-protocol-version": BATCH_VERSION}
    answers = array_of(await wire.post([rpc("ping", None, 1)], headers))
    assert answers == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


async def test_each_member_gets_its_own_call_request(wire: Wire) -> None:
    headers = await batch_session(wire)
    answers = array_of(await wire.post([call("own_body", None, 1), rpc("ping", None, 2)], headers))
    assert answers[0]["result"]["structuredContent"]["result"] == "own_body"


async def test_concurrent_members_solve_their_dependencies_in_their_own_scopes(wire: Wire) -> None:
    """Two members of a dependency-taking tool, open at once: each keeps its own exit stack."""
    headers = await batch_session(wire)
    answers = array_of(await wire.post([call("held", None, 1), call("held", None, 2)], headers))
    assert [a["result"]["structuredContent"]["result"] for a in answers] == ["own", "own"]


async def test_notifications_and_responses_only_are_202(wire: Wire) -> None:
    headers = await batch_session(wire)
    notes = [rpc("notifications/initialized", None, None), rpc("notifications/cancelled", {"requestId": 99}, None)]
    response = await wire.post(notes, headers)
    assert response.status_code == 202 and response.content == b""
    answers = [{"jsonrpc": "2.0", "id": 7, "result": {}}, {"jsonrpc": "2.0", "id": 8, "error": {"code": -1, "message": "no"}}]
    response = await wire.post(answers, headers)
    assert response.status_code == 202 and response.content == b""


async def test_an_empty_batch_is_one_invalid_request_error(wire: Wire) -> None:
    headers = await batch_session(wire)
    for content in (b"[]", b" [ ] "):
        response = await wire.post(None, headers, content=content)
        error = assert_error(response, 400, -32600, request_id=None)
        assert isinstance(response.json(), dict) and "empty" in error["message"]


async def test_invalid_json_is_one_parse_error(wire: Wire) -> None:
    headers = await batch_session(wire)
    invalid_utf8 = b'[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"t":"a \x97 b"}}]'  # B18 inside a batch
    for content in (b'[{"jsonrpc":"2.0","method":"ping","id":1},{"jsonrpc":"2.0"', b"[1,]", b"[1 2]", b"[NaN]", b"[1] x", invalid_utf8):
        response = await wire.post(None, headers, content=content)
        assert_error(response, 400, -32700, request_id=None)


async def test_invalid_members_are_answered_one_by_one(wire: Wire) -> None:
    """JSON-RPC 2.0 §6 per member: B18/B19 shapes get their own error, a notification (B20) none."""
    headers = await batch_session(wire)
    body = [
        1,
        {"foo": "boo"},
        rpc("ping", None, 5),
        {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": [1]},
        {"jsonrpc": "2.0", "id": 9, "method": "nope/nope"},
        rpc("notifications/initialized", None, None),
    ]
    response = await wire.post(body, headers)
    assert response.status_code == 200
    answers = array_of(response)
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [(None, -32600), (None, -32600), (5, None), (6, -32600), (9, -32601)]


async def test_a_batch_of_only_invalid_members_is_400_with_an_array(wire: Wire) -> None:
    headers = await batch_session(wire)
    response = await wire.post([1, 2, 3], headers)
    assert response.status_code == 400
    answers = array_of(response)
    assert [(a["id"], a["error"]["code"]) for a in answers] == [(None, -32600)] * 3


async def test_a_duplicate_key_in_a_member_is_refused_for_that_member(wire: Wire) -> None:
    headers = await batch_session(wire)
    content = b'[{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"ping"}]'
    answers = array_of(await wire.post(None, headers, content=content))
    assert answers[0]["id"] == 1 and answers[0]["error"]["code"] == -32600 and "Duplicate key" in answers[0]["error"]["message"]
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_initialize_inside_a_batch_is_refused(wire: Wire) -> None:
    headers = await batch_session(wire)
    init = rpc("initialize", {"protocolVersion": BATCH_VERSION, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}, 1)
    answers = array_of(await wire.post([init, rpc("ping", None, 2)], headers))
    assert answers[0]["id"] == 1 and answers[0]["error"]["code"] == -32600
    assert "initialize must not be part of a JSON-RPC batch" in answers[0]["error"]["message"]
    assert answers[1]["result"] == {}


async def test_a_request_id_used_twice_in_a_batch_is_refused_the_second_time(wire: Wire) -> None:
    headers = await batch_session(wire)
    answers = array_of(await wire.post([call("add", {"a": 1, "b": 1}, 4), rpc("ping", None, 4)], headers))
    assert answers[0]["result"]["structuredContent"] == {"result": 2}
    assert answers[1]["id"] == 4 and "used twice" in answers[1]["error"]["message"]


async def test_a_batch_larger_than_the_bound_is_refused_whole() -> None:
    app, _ = build_app(max_batch_size=3)
    async with open_client(app) as client:
        wire = Wire(client)
        headers = await batch_session(wire)
        assert len(array_of(await wire.post([rpc("ping", None, n) for n in range(3)], headers))) == 3
        response = await wire.post([rpc("ping", None, n) for n in range(4)], headers)
    error = assert_error(response, 400, -32600, request_id=None)
    assert "more than 3 messages" in error["message"] and "MCP_MAX_BATCH_SIZE" in error["message"]
    assert error["data"]["maxBatchSize"] == 3


async def test_the_body_size_limit_still_applies() -> None:
    app, _ = build_app(max_body_bytes=2048)
    async with open_client(app) as client:
        wire = Wire(client)
        headers = await batch_session(wire)
        response = await wire.post([rpc("ping", None, n) for n in range(60)], headers)
    assert_error(response, 413, -32600)


async def test_an_sse_only_client_gets_each_response_as_an_event(wire: Wire) -> None:
    headers = {**await batch_session(wire), "accept": "text/event-stream"}
    response = await wire.post([rpc("ping", None, 1), call("add", {"a": 2, "b": 3}, 2)], headers)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    messages = [json.loads(event["data"]) for event in sse_events(response.text)]
    assert sorted(m["id"] for m in messages) == [1, 2]
    assert next(m for m in messages if m["id"] == 2)["result"]["structuredContent"] == {"result": 5}


async def test_a_call_notifying_switches_to_sse_and_a_cancelled_member_gets_32800(
    client: httpx.AsyncClient, gate_app: tuple[Any, Gate]
) -> None:
    wire = Wire(client)
    headers = await batch_session(wire)
    gate = gate_app[1]
    slow = rpc("tools/call", {"name": "slow", "arguments": {}, "_meta": {"progressToken": "p"}}, "s")
    result: list[httpx.Response] = []

    async def send_batch() -> None:
        result.append(await wire.post([slow, rpc("ping", None, 2)], {**headers, "accept": ACCEPT_BOTH}))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(send_batch)
            await gate.started.wait()
            cancel = await wire.post(rpc("notifications/cancelled", {"requestId": "s", "reason": "user"}, None), headers)
            assert cancel.status_code == 202
    response = result[0]
    assert response.headers["content-type"].startswith("text/event-stream"), response.text
    messages = [json.loads(event["data"]) for event in sse_events(response.text)]
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert progress and progress[0]["params"]["progressToken"] == "p"
    finals = {m["id"]: m for m in messages if "id" in m}
    assert finals[2]["result"] == {}
    assert finals["s"]["error"]["code"] == -32800


async def test_a_client_leaving_mid_batch_cancels_its_calls_and_gets_nothing(
    client: httpx.AsyncClient, gate_app: tuple[Any, Gate]
) -> None:
    app, gate = gate_app
    headers = {**await batch_session(Wire(client)), "content-type": "application/json", "accept": "application/json"}
    body = json.dumps([call("slow", None, 1), rpc("ping", None, 2)]).encode()
    async with asgi_exchange(app, "POST", headers=headers, body_chunks=[body], wait_started=False) as exchange:
        with anyio.fail_after(5):
            await gate.started.wait()
        exchange.disconnect.set()
        with anyio.fail_after(5):  # the 30 s tool was cancelled, not awaited
            await exchange.finished.wait()
    assert exchange.status is None and exchange.body == b""


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
async def test_sessions_at_other_versions_keep_refusing_arrays(wire: Wire, version: str) -> None:
    headers = await batch_session(wire, version)
    response = await wire.post([rpc("ping", None, 1), rpc("ping", None, 2)], headers)
    error = assert_error(response, 400, -32600, request_id=None)
    assert error["message"] == SINGLE_MESSAGE and isinstance(response.json(), dict)


async def test_the_2026_era_and_sessionless_requests_keep_refusing_arrays(wire: Wire) -> None:
    await batch_session(wire)
    modern = {"mcp-protocol-version": MODERN, "mcp-method": "tools/list", "mcp-session-id": wire.session or ""}
    for headers in (modern, {}, {"mcp-protocol-version": BATCH_VERSION}):
        response = await wire.post([rpc("tools/list", {"_meta": modern_meta()}, 1)], headers)
        assert assert_error(response, 400, -32600, request_id=None)["message"] == SINGLE_MESSAGE


async def test_a_batch_naming_an_unknown_session_is_404(wire: Wire) -> None:
    response = await wire.post([rpc("ping", None, 1)], {"mcp-session-id": "not-a-session"})
    assert response.status_code == 404


async def test_a_batch_over_a_real_uvicorn_server() -> None:
    app, _ = build_app()
    with uvicorn_thread(app) as url:
        async with httpx.AsyncClient(timeout=10) as http:
            init = rpc("initialize", {"protocolVersion": BATCH_VERSION, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}, 0)
            plain = {"content-type": "application/json", "accept": ACCEPT_BOTH}
            opened = await http.post(url, json=init, headers=plain)
            assert opened.json()["result"]["protocolVersion"] == BATCH_VERSION
            session = {**plain, "mcp-session-id": opened.headers["mcp-session-id"]}
            note = await http.post(url, json=[rpc("notifications/initialized", None, None)], headers=session)
            assert note.status_code == 202
            response = await http.post(url, json=[call("wait_for_open", None, 1), call("open_gate", None, 2), rpc("ping", None, 3)], headers=session)
    assert response.status_code == 200, response.text
    answers = array_of(response)
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert answers[0]["result"]["structuredContent"] == {"result": "waited"}
