"""Known faults of multi-round-trip input, each held at the right value.

- B45 (server→client request lifecycle): ``await ctx.list_roots()`` for a client that did not
  declare ``roots`` fails at once with nothing on the wire; an ``await ctx.elicit`` nobody
  answers ends as an ``isError`` after its timeout with the pending table empty again, and the
  late answer is 202 and applied to nothing.
- B27 (undeclared answers) is in tests/test_input_required.py; here: an answer posted for a
  kind the session did not declare never reaches ``ctx.inputs`` in the 2025 era either.
- B46 (non-tool input_required): the runner of a ``resources/read`` or ``prompts/get`` call
  turns the signal into the same ``input_required`` result and re-enters on the retry; without a
  tool, a refusal or a failed round is a JSON-RPC error (a tool's is an ``isError`` result);
  ``ctx.request_input`` while serving another method is a server error, never a result.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from conftest import Wire, error_of, make_app, make_router, mcp_settings, open_client, result_of, sse_events
from fastapi import Depends, FastAPI
from pydantic import BaseModel
from serving import uvicorn_thread
from starlette.requests import Request

from fastapi_mcp_ctx import Context, McpRouter, input_required, mcp_context
from fastapi_mcp_ctx._wire.envelope import RequestEnvelope
from fastapi_mcp_ctx.context import CallState
from fastapi_mcp_ctx.errors import InternalError


class Name(BaseModel):
    name: str


def build() -> tuple[FastAPI, McpRouter]:
    router = make_router()

    @router.tool()
    async def roots_please(ctx: Context = Depends(mcp_context)) -> list[str]:
        """Lists the client's roots."""
        return [str(root.uri) for root in await ctx.list_roots()]

    @router.tool()
    async def ask_user(ctx: Context = Depends(mcp_context)) -> str:
        """Asks, waiting 0.3 s at most."""
        answer = await ctx.elicit("Name?", Name, timeout=0.3)
        return answer.action

    @router.tool()
    async def pre_answered(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Reports what ctx.inputs holds without asking."""
        return {name: ctx.inputs.view(name).kind for name in ("confirm", "summary")}

    app = FastAPI()
    app.include_router(router)
    return app, router


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, McpRouter]]:
    app, router = build()
    with uvicorn_thread(app) as url:
        yield url.removesuffix("/mcp"), router


@pytest.fixture
async def live(served: tuple[str, McpRouter]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=served[0], timeout=10) as client:
        yield client


async def stream_call(client: httpx.AsyncClient, wire: Wire, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every message of one streamed 2025 ``tools/call`` (never answering a request)."""
    body = {"jsonrpc": "2.0", "id": wire.next_id(), "method": "tools/call", "params": {"name": name, "arguments": {}, **(params or {})}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **wire.legacy_headers()}
    response = await client.post(wire.path, content=json.dumps(body), headers=headers)
    if response.headers["content-type"].startswith("application/json"):
        return [response.json()]
    return [json.loads(e["data"]) for e in sse_events(response.text) if e.get("data")]


async def test_b45_roots_not_declared_fails_at_once_with_nothing_sent(live: httpx.AsyncClient, served: tuple[str, McpRouter]) -> None:
    wire = Wire(live)
    await wire.initialize(capabilities={"elicitation": {}})
    with anyio.fail_after(30):
        messages = await stream_call(live, wire, "roots_please")
    assert len(messages) == 1, messages  # the result only: no roots/list was sent
    result = messages[0]["result"]
    error = result["_meta"]["fastapi-mcp-ctx/error"]
    assert result["isError"] is True and error["code"] == -32600
    assert error["data"]["requiredCapabilities"] == {"roots": {}}
    assert len(served[1].pending) == 0


async def test_b45_unanswered_elicitation_times_out_and_leaves_nothing(live: httpx.AsyncClient, served: tuple[str, McpRouter]) -> None:
    wire = Wire(live)
    await wire.initialize(capabilities={"elicitation": {}})
    with anyio.fail_after(30):
        messages = await stream_call(live, wire, "ask_user")
    asked = [m for m in messages if m.get("method") == "elicitation/create"]
    cancelled = [m for m in messages if m.get("method") == "notifications/cancelled"]
    assert len(asked) == 1 and cancelled and cancelled[0]["params"]["requestId"] == asked[0]["id"]
    result = messages[-1]["result"]
    assert result["isError"] is True
    assert result["_meta"]["fastapi-mcp-ctx/error"]["data"]["reason"] == "server_request_timeout"
    assert len(served[1].pending) == 0
    late = {"jsonrpc": "2.0", "id": asked[0]["id"], "result": {"action": "accept", "content": {"name": "late"}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **wire.legacy_headers()}
    posted = await live.post(wire.path, content=json.dumps(late), headers=headers)
    assert posted.status_code == 202 and len(served[1].pending) == 0


async def test_undeclared_pre_answers_are_dropped_in_the_2025_era(live: httpx.AsyncClient) -> None:
    wire = Wire(live)
    await wire.initialize(capabilities={"elicitation": {"url": {}}})  # URL mode only, no sampling
    answers = {
        "confirm": {"action": "accept", "content": {"ok": True}},  # a form answer: needs elicitation.form
        "summary": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"},  # needs sampling
    }
    messages = await stream_call(live, wire, "pre_answered", {"inputResponses": answers})
    assert messages[-1]["result"]["structuredContent"] == {"confirm": "none", "summary": "none"}


# -- B46: resources/read and prompts/get ----------------------------------------------------------
def call_for(method: str, era: str, capabilities: dict[str, Any] | None) -> tuple[Context, CallState]:
    version = "2026-07-28" if era == "modern" else "2025-11-25"
    envelope = RequestEnvelope(era=era, protocol_version=version, client_capabilities=capabilities)  # pyright: ignore[reportArgumentType]
    request = Request({"type": "http", "method": "POST", "path": "/mcp", "headers": [], "query_string": b""})
    state = CallState(request_id=7, method=method, envelope=envelope, settings=mcp_settings(), request=request)
    return Context(state), state


def deploy_app(runs: list[str | None], **settings: Any) -> FastAPI:
    """Two prompts and a resource template whose handler asks to confirm (``request_state``
    ``deploy-1``), recording the state of each run in ``runs``."""
    router = make_router(**settings)

    def deploy(ctx: Context) -> str:
        runs.append(ctx.inputs.state())
        confirmed = ctx.inputs.accepted("ok", Name)
        if confirmed is None:
            ctx.request_input({"ok": input_required.elicit("Deploy to prod?", Name)}, request_state="deploy-1")
        return f"deploy by {confirmed.name}"

    @router.prompt()
    async def deploy_prompt(env: str, ctx: Context = Depends(mcp_context)) -> str:
        return deploy(ctx)

    @router.prompt()
    async def other_prompt(env: str, ctx: Context = Depends(mcp_context)) -> str:
        return deploy(ctx)

    @router.resource("vault://secret/{name}")
    async def secret(name: str, ctx: Context = Depends(mcp_context)) -> str:
        return deploy(ctx)

    return make_app(router)


@pytest.mark.parametrize(
    ("method", "params"), [("prompts/get", {"name": "deploy_prompt", "arguments": {"env": "prod"}}), ("resources/read", {"uri": "vault://secret/a"})]
)
async def test_b46_non_tool_input_required_passes_through(method: str, params: dict[str, Any]) -> None:
    runs: list[str | None] = []
    meta = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    async with open_client(deploy_app(runs)) as client:
        wire = Wire(client)
        result = result_of(await wire.modern(method, params, meta=meta))
        assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["ok"]
        assert "ttlMs" not in result and "messages" not in result and "contents" not in result
        answers = {"ok": {"action": "accept", "content": {"name": "Ada"}}}
        other = {**params, "name": "other_prompt"} if method == "prompts/get" else {"uri": "vault://secret/b"}
        refused = await wire.modern(method, {**other, "inputResponses": answers, "requestState": result["requestState"]}, meta=meta, check=False)
        error = error_of(refused)  # sealed for this prompt or resource only
        assert error["code"] == -32602 and error["data"]["reason"] == "invalid_request_state"
        retry = {**params, "inputResponses": answers, "requestState": result["requestState"]}
        done = result_of(await wire.modern(method, retry, meta=meta))
    assert done["resultType"] == "complete"
    if method == "prompts/get":
        assert done["messages"] == [{"role": "user", "content": {"type": "text", "text": "deploy by Ada"}}]
    else:
        assert [content["text"] for content in done["contents"]] == ["deploy by Ada"]
    assert runs == [None, "deploy-1"]


async def test_b46_a_2025_prompt_without_a_session_is_refused_not_rendered() -> None:
    runs: list[str | None] = []
    async with open_client(deploy_app(runs, session_mode="stateless")) as client:
        response = await Wire(client).legacy("prompts/get", {"name": "deploy_prompt", "arguments": {"env": "prod"}}, session=None, check=False)
    error = error_of(response)  # no tool: a JSON-RPC -32600 error, not a result
    assert error["code"] == -32600 and error["data"]["reason"] == "client_capability_missing"
    assert "stateful session" in error["data"]["recovery"]["hint"]
    assert runs == [None]


def asking_app() -> FastAPI:
    """A tool and a prompt asking in their first attempt (``await ctx.elicit``) or in a later
    round (``ctx.request_input``); nobody answers within MCP_SERVER_REQUEST_TIMEOUT_SECONDS."""
    router = make_router(server_request_timeout_seconds=0.3)

    async def ask(ctx: Context, how: str) -> str:
        if how == "await":
            return (await ctx.elicit("Name?", Name)).action
        ctx.request_input({"ok": input_required.elicit("Name?", Name)})

    @router.tool()
    async def ask_tool(how: str, ctx: Context = Depends(mcp_context)) -> str:
        """Asks the user's name."""
        return await ask(ctx, how)

    @router.prompt()
    async def ask_prompt(how: str, ctx: Context = Depends(mcp_context)) -> str:
        return await ask(ctx, how)

    return make_app(router)


@pytest.mark.parametrize("how", ["await", "request_input"])
async def test_b46_a_failed_round_is_a_tools_is_error_and_a_prompts_json_rpc_error(how: str) -> None:
    """2025: a server→client request that fails, in the first attempt or a later round."""
    async with open_client(asking_app()) as client:
        wire = Wire(client)
        await wire.initialize(capabilities={"elicitation": {}})
        with anyio.fail_after(30):
            tool = result_of(await wire.legacy("tools/call", {"name": "ask_tool", "arguments": {"how": how}}))
            prompt = await wire.legacy("prompts/get", {"name": "ask_prompt", "arguments": {"how": how}}, check=False)
    assert tool["isError"] is True and tool["_meta"]["fastapi-mcp-ctx/error"]["data"]["reason"] == "server_request_timeout"
    assert error_of(prompt)["data"]["reason"] == "server_request_timeout"


@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list", "completion/complete"])
def test_b46_request_input_elsewhere_is_a_server_error(method: str) -> None:
    context, _ = call_for(method, "modern", {"elicitation": {}})
    with pytest.raises(InternalError):
        context.request_input({"ok": input_required.elicit("Sure?", Name)})


async def test_b46_an_awaited_question_elsewhere_is_a_server_error_in_2026() -> None:
    context, _ = call_for("completion/complete", "modern", {"elicitation": {}})
    with pytest.raises(InternalError):
        await context.elicit("Sure?", Name)


class City(BaseModel):
    city: str


async def test_answers_too_large_to_carry_are_the_clients_fault_not_a_server_error() -> None:
    """2026: what a handler consumes travels on in the sealed requestState; an answer larger
    than half of MCP_REQUEST_STATE_MAX_BYTES is -32602 (was -32603 request_state_too_large)."""
    router = make_router(request_state_max_bytes=4096)

    @router.tool()
    async def trip(ctx: Context = Depends(mcp_context)) -> str:
        first = await ctx.elicit("Where to?", City)
        second = await ctx.elicit("And then?", City)
        return f"{first.data} {second.data}"

    meta = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        asked = (await wire.modern("tools/call", {"name": "trip", "arguments": {}}, meta=meta)).json()["result"]
        key = next(iter(asked["inputRequests"]))
        retry = {"name": "trip", "arguments": {}, "requestState": asked["requestState"],
                 "inputResponses": {key: {"action": "accept", "content": {"city": "a" * 5000}}}}  # fmt: skip
        refused = await wire.modern("tools/call", retry, meta=meta, check=False)
        assert refused.status_code == 400, refused.text
        error = error_of(refused)
        assert error["code"] == -32602 and error["data"]["reason"] == "input_responses_too_large"
        retry["inputResponses"] = {key: {"action": "accept", "content": {"city": "Lyon"}}}
        again = (await wire.modern("tools/call", retry, meta=meta)).json()["result"]
        assert again["resultType"] == "input_required"  # the second question: the small answer is carried
