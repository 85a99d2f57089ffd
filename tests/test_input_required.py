"""Multi-round-trip input on the raw wire: ``ctx.request_input``, ``ctx.inputs`` and the
awaitable helpers, 2026-07-28 (``input_required`` + retries) and 2025 (real server→client
requests on the call's stream, re-entry), capability gating and admission of answers.

Known faults: B06 (stateless 2025 never hangs), B27 (undeclared / malformed answers never
reach the handler), B45 (a request the client cannot answer fails at once), B46-shaped checks
for a method that may not ask.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from enum import Enum
from typing import Any, Literal

import anyio
import httpx
import pytest
from conftest import Wire, error_of, make_app, make_router, messages_of, result_of, sse_events
from fastapi import Depends, FastAPI
from pydantic import BaseModel, Field
from serving import uvicorn_thread

from examples.input_required import router as example_router
from fastapi_mcp_ctx import Context, InputRequired, ToolError, input_required, mcp_context

FORM_CAPS = {"elicitation": {}}
ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": True}}


class Confirm(BaseModel):
    ok: bool


def build_app(**settings: Any) -> FastAPI:
    router = make_router(**settings)

    @router.tool()
    async def confirm_twice(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Asks with a state, then answers with what came back."""
        view = ctx.inputs.view("confirm")
        if view.kind == "none":
            ctx.request_input({"confirm": input_required.elicit("Sure?", Confirm)}, request_state="job-7")
        return {"state": ctx.inputs.state(), "action": view.action, "ok": getattr(ctx.inputs.accepted("confirm", Confirm), "ok", None)}

    @router.tool()
    async def state_only(ctx: Context = Depends(mcp_context)) -> str:
        """A round that asks nothing, carrying only a state."""
        if ctx.inputs.state() is None:
            ctx.request_input(request_state="step-1")
        return f"resumed from {ctx.inputs.state()}"

    @router.tool()
    async def everything(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Three kinds in one round."""
        names = {"name": ctx.inputs.view("name"), "greeting": ctx.inputs.view("greeting"), "roots": ctx.inputs.view("roots")}
        if any(v.kind == "none" for v in names.values()):
            ctx.request_input(
                {
                    "name": input_required.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
                    "greeting": input_required.sample("Say hi", max_tokens=50),
                    "roots": input_required.list_roots(),
                }
            )
        return {"name": names["name"].content, "greeting": names["greeting"].text, "roots": names["roots"].roots}

    @router.tool()
    async def swallow(ctx: Context = Depends(mcp_context)) -> str:
        """Raises ToolError after asking when declined."""
        answer = await ctx.elicit("Proceed?", Confirm, key="go")
        if answer.action != "accept":
            raise ToolError(f"user chose {answer.action}")
        return f"ok={answer.data.ok if answer.data else None}"

    app = make_app(router)
    return app


@pytest.fixture
def app() -> FastAPI:
    return build_app()


def modern_caps(caps: dict[str, Any]) -> dict[str, Any]:
    return {"io.modelcontextprotocol/clientCapabilities": caps}


async def call_modern(wire: Wire, name: str, caps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    response = await wire.modern("tools/call", {"name": name, "arguments": extra.pop("arguments", {}), **extra}, meta=modern_caps(caps))
    assert response.status_code == 200, response.text
    return result_of(response)


# -- 2026-07-28 ------------------------------------------------------------------------------
async def test_modern_round_trip_with_state(wire: Wire) -> None:
    first = await call_modern(wire, "confirm_twice", FORM_CAPS)
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {
        "confirm": {
            "method": "elicitation/create",
            "params": {"message": "Sure?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean", "title": "Ok"}}, "required": ["ok"]}},
        }
    }
    assert isinstance(first["requestState"], str) and "ttlMs" not in first
    assert first["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "test-server"
    answers = {"confirm": {"action": "accept", "content": {"ok": True}}}
    second = await call_modern(wire, "confirm_twice", FORM_CAPS, inputResponses=answers, requestState=first["requestState"])
    assert second["resultType"] == "complete"
    assert second["structuredContent"] == {"state": "job-7", "action": "accept", "ok": True}


async def test_modern_state_only_round(wire: Wire) -> None:
    first = await call_modern(wire, "state_only", {})
    assert first["resultType"] == "input_required" and "inputRequests" not in first
    second = await call_modern(wire, "state_only", {}, requestState=first["requestState"])
    assert second["content"][0]["text"] == "resumed from step-1"


async def test_modern_three_kinds_in_one_round(wire: Wire) -> None:
    first = await call_modern(wire, "everything", ALL_CAPS)
    assert {k: v["method"] for k, v in first["inputRequests"].items()} == {
        "name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "roots": "roots/list",
    }
    answers = {
        "name": {"action": "accept", "content": {"name": "Ada"}},
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m", "stopReason": "endTurn"},
        "roots": {"roots": [{"uri": "file:///w", "name": "w"}]},
    }
    second = await call_modern(wire, "everything", ALL_CAPS, inputResponses=answers, requestState=first["requestState"])
    assert second["structuredContent"] == {"name": {"name": "Ada"}, "greeting": "hi", "roots": [{"uri": "file:///w", "name": "w"}]}


async def test_modern_undeclared_kind_is_32021(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "everything", "arguments": {}}, meta=modern_caps({"sampling": {}}))
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}


async def test_modern_tampered_or_foreign_state_is_refused(wire: Wire) -> None:
    first = await call_modern(wire, "confirm_twice", FORM_CAPS)
    for state in (first["requestState"] + "-TAMPERED", 12, "not json"):
        response = await wire.modern(
            "tools/call", {"name": "confirm_twice", "arguments": {}, "requestState": state}, meta=modern_caps(FORM_CAPS), check=False
        )
        assert response.status_code == 400, (state, response.text)
        error = error_of(response)
        assert error["code"] == -32602 and error["data"]["reason"] == "invalid_request_state"


async def test_modern_state_of_another_tool_or_arguments_is_refused(wire: Wire) -> None:
    first = await call_modern(wire, "confirm_twice", FORM_CAPS)
    for name, arguments in (("state_only", {}), ("confirm_twice", {"extra": 1})):
        response = await wire.modern(
            "tools/call", {"name": name, "arguments": arguments, "requestState": first["requestState"]}, meta=modern_caps(FORM_CAPS), check=False
        )
        assert error_of(response)["data"]["reason"] == "invalid_request_state", (name, response.text)


async def test_modern_malformed_input_responses(wire: Wire) -> None:
    response = await wire.modern(
        "tools/call", {"name": "confirm_twice", "arguments": {}, "inputResponses": [1]}, meta=modern_caps(FORM_CAPS), check=False
    )
    assert error_of(response)["code"] == -32602
    # null is no answers at all: the handler asks again
    again = await call_modern(wire, "confirm_twice", FORM_CAPS, inputResponses=None)
    assert again["resultType"] == "input_required"


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "accept", "content": 7},
        {"action": "accept", "content": {"ok": {"nested": True}}},
        {"action": "maybe"},
        12345,
        {"role": "assistant"},
    ],
)
async def test_b27_malformed_answers_never_reach_the_handler(wire: Wire, answer: Any) -> None:
    first = await call_modern(wire, "confirm_twice", FORM_CAPS)
    again = await call_modern(wire, "confirm_twice", FORM_CAPS, inputResponses={"confirm": answer}, requestState=first["requestState"])
    assert again["resultType"] == "input_required"


async def test_b27_decline_never_carries_content(wire: Wire) -> None:
    first = await call_modern(wire, "confirm_twice", FORM_CAPS)
    answers = {"confirm": {"action": "decline", "content": {"ok": True}}, "other": {"action": "accept", "content": {"x": 1}}}
    done = await call_modern(wire, "confirm_twice", FORM_CAPS, inputResponses=answers, requestState=first["requestState"])
    assert done["structuredContent"] == {"state": "job-7", "action": "decline", "ok": None}


async def test_undeclared_answers_are_dropped_at_the_mode_level(wire: Wire) -> None:
    """A URL-only client's form answer, and any answer of a client declaring nothing, is dropped."""
    pre_answered = {"confirm": {"action": "accept", "content": {"ok": True}}}
    for caps in ({"elicitation": {"url": {}}}, {}):
        response = await wire.modern(
            "tools/call", {"name": "confirm_twice", "arguments": {}, "inputResponses": pre_answered}, meta=modern_caps(caps), check=False
        )
        # the form question is asked again, which this client cannot answer: -32021
        assert error_of(response)["code"] == -32021
    # the same pre-answer from a client that declared form mode is admitted
    accepted = await call_modern(wire, "confirm_twice", FORM_CAPS, inputResponses=pre_answered)
    assert accepted["structuredContent"]["ok"] is True


async def test_sampling_tool_blocks_need_sampling_tools(wire: Wire) -> None:
    first = await call_modern(wire, "everything", ALL_CAPS)
    tool_use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}], "model": "m"}
    answers = {
        "name": {"action": "accept", "content": {"name": "Ada"}},
        "greeting": tool_use,
        "roots": {"roots": []},
    }
    again = await call_modern(wire, "everything", ALL_CAPS, inputResponses=answers, requestState=first["requestState"])
    assert again["resultType"] == "input_required"  # the tool_use answer was dropped
    with_tools = {**ALL_CAPS, "sampling": {"tools": {}}}
    done = await call_modern(wire, "everything", with_tools, inputResponses=answers, requestState=first["requestState"])
    assert done["resultType"] == "complete"


async def test_modern_awaitable_decline_and_key(wire: Wire) -> None:
    first = await call_modern(wire, "swallow", FORM_CAPS)
    assert list(first["inputRequests"]) == ["go"]
    done = await call_modern(wire, "swallow", FORM_CAPS, inputResponses={"go": {"action": "cancel"}}, requestState=first["requestState"])
    assert done["isError"] is True and "user chose cancel" in done["content"][0]["text"]


async def test_tools_list_never_input_required(wire: Wire) -> None:
    response = await wire.modern("tools/list", {"inputResponses": {"x": {"action": "accept"}}}, meta=modern_caps(FORM_CAPS))
    assert result_of(response)["resultType"] == "complete"


# -- 2025 era --------------------------------------------------------------------------------
async def legacy_call_answering(
    client: httpx.AsyncClient, wire: Wire, name: str, answer_for: Any, arguments: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Call ``name`` in the current 2025 session, answering each request with ``answer_for(request)``."""
    asked: list[dict[str, Any]] = []
    body = {"jsonrpc": "2.0", "id": wire.next_id(), "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **wire.legacy_headers()}
    final: dict[str, Any] = {}
    async with client.stream("POST", wire.path, content=json.dumps(body), headers=headers) as response:
        buffer = ""
        async for chunk in response.aiter_text():
            buffer = (buffer + chunk).replace("\r\n", "\n")
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                for event in sse_events(frame + "\n\n"):
                    if not event.get("data"):
                        continue
                    data = json.loads(event["data"])
                    if "method" in data and "id" in data:
                        asked.append(data)
                        reply = {"jsonrpc": "2.0", "id": data["id"], "result": answer_for(data)}
                        posted = await client.post(wire.path, content=json.dumps(reply), headers=headers)
                        assert posted.status_code == 202, posted.text
                    elif "id" in data and ("result" in data or "error" in data):
                        final = data
    return final, asked


@pytest.fixture(scope="module")
def live_base() -> Iterator[str]:
    """A real uvicorn server (SSE responses stream; an in-process ASGI transport buffers them)."""
    router = make_router(input_max_rounds=2)

    @router.tool()
    async def nag(ctx: Context = Depends(mcp_context)) -> str:
        """Asks forever."""
        ctx.request_input({"again": input_required.elicit("Again?", Confirm)})

    app = build_app()
    app.include_router(example_router, prefix="/example")
    app.include_router(router, prefix="/bounded")
    with uvicorn_thread(app) as url:
        yield url.removesuffix("/mcp")


@pytest.fixture
async def live(live_base: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live_base, timeout=10) as client:
        yield client


@pytest.fixture
async def legacy_wire(live: httpx.AsyncClient) -> Wire:
    wire = Wire(live)
    await wire.initialize(capabilities=ALL_CAPS)
    return wire


async def test_legacy_request_input_sends_and_reenters(live: httpx.AsyncClient, legacy_wire: Wire) -> None:
    with anyio.fail_after(10):
        final, asked = await legacy_call_answering(live, legacy_wire, "confirm_twice", lambda _: {"action": "accept", "content": {"ok": True}})
    assert [a["method"] for a in asked] == ["elicitation/create"]
    assert final["result"]["structuredContent"] == {"state": "job-7", "action": "accept", "ok": True}


async def test_legacy_three_kinds(live: httpx.AsyncClient, legacy_wire: Wire) -> None:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return {
            "elicitation/create": {"action": "accept", "content": {"name": "Ada"}},
            "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
            "roots/list": {"roots": [{"uri": "file:///w"}]},
        }[request["method"]]

    with anyio.fail_after(10):
        final, asked = await legacy_call_answering(live, legacy_wire, "everything", answer)
    assert sorted(a["method"] for a in asked) == ["elicitation/create", "roots/list", "sampling/createMessage"]
    assert final["result"]["structuredContent"]["greeting"] == "hi"


async def test_legacy_undeclared_capability_is_an_is_error_envelope() -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=make_app(example_router)), base_url="http://127.0.0.1") as client:
        wire = Wire(client)
        await wire.initialize(capabilities={"sampling": {}})
        response = await wire.legacy("tools/call", {"name": "export_report", "arguments": {"report_id": "r1"}})
    await _check_refusal(response)


async def _check_refusal(response: httpx.Response) -> None:
    result = result_of(response)
    assert result["isError"] is True
    error = result["structuredContent"]["error"] if "structuredContent" in result else result["_meta"]["fastapi-mcp-ctx/error"]
    assert error["code"] == -32600
    assert error["data"]["reason"] == "client_capability_missing"
    assert error["data"]["recovery"]["hint"] == (
        "Reconnect with a client that declares the `elicitation.form` capability. Or call again with format supplied."
    )
    assert error["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
    assert all("method" not in m or "id" not in m for m in messages_of(response))  # nothing was sent


async def test_legacy_rounds_are_bounded(live: httpx.AsyncClient) -> None:
    wire = Wire(live, "/bounded/mcp")
    await wire.initialize(capabilities=FORM_CAPS)
    with anyio.fail_after(10):
        final, asked = await legacy_call_answering(live, wire, "nag", lambda _: {"action": "accept", "content": {"ok": True}})
    assert len(asked) == 2
    result = final["result"]
    assert result["isError"] is True
    assert result["_meta"]["fastapi-mcp-ctx/error"]["data"]["reason"] == "input_rounds_exceeded"


async def test_b06_stateless_legacy_is_refused_at_once() -> None:
    stateless = build_app(session_mode="stateless")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=stateless), base_url="http://127.0.0.1") as client:
        wire = Wire(client)
        with anyio.fail_after(30):
            response = await wire.legacy("tools/call", {"name": "swallow", "arguments": {}}, session=None)
    result = result_of(response)
    assert result["isError"] is True
    error = result["_meta"]["fastapi-mcp-ctx/error"]
    assert error["code"] == -32600 and error["data"]["reason"] == "client_capability_missing"
    assert "stateful session" in error["data"]["recovery"]["hint"]
    assert "no session" in error["message"]


def test_request_input_needs_something() -> None:
    with pytest.raises(TypeError):
        InputRequired()
    with pytest.raises(ValueError):
        InputRequired({"x": {"method": "tools/call", "params": {}}})


# -- builders ---------------------------------------------------------------------------------
class Color(str, Enum):
    red = "red"
    blue = "blue"


class Profile(BaseModel):
    name: str = Field(description="Your name", min_length=1, max_length=40, pattern="^[A-Z]")
    age: int | None = Field(default=30, ge=0, le=150)
    score: float = 95.5
    agree: bool = True
    size: Literal["s", "m", "l"] = "m"
    color: Color = Color.red
    tags: list[Literal["a", "b"]] = Field(default_factory=list)


def test_a_model_becomes_the_primitive_schema_the_spec_admits() -> None:
    schema = input_required.elicitation_schema(Profile)
    props = schema["properties"]
    assert schema["type"] == "object" and schema["required"] == ["name"]
    assert props["name"] == {"type": "string", "title": "Name", "description": "Your name", "minLength": 1, "maxLength": 40}
    assert props["age"] == {"type": "integer", "title": "Age", "default": 30, "minimum": 0, "maximum": 150}
    assert props["score"]["default"] == 95.5 and props["agree"]["type"] == "boolean"
    assert props["size"] == {"type": "string", "title": "Size", "enum": ["s", "m", "l"], "default": "m"}
    assert props["color"]["enum"] == ["red", "blue"] and props["color"]["type"] == "string"
    assert props["tags"]["items"] == {"type": "string", "enum": ["a", "b"]}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"address": {"type": "object", "properties": {}}}},
        {"type": "object", "properties": {"code": {"type": "string", "pattern": "^x"}}},
        {"type": "object", "properties": {"when": {"type": "string", "format": "time"}}},
        {"type": "object", "properties": {"e": {"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}}},
        {"type": "object", "properties": {"m": {"type": "array", "items": {"type": "integer"}}}},
        {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["y"]},
        {"type": "array"},
        {"type": "object"},
    ],
)
def test_schemas_outside_the_spec_are_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        input_required.elicit("Question?", schema)


def test_builders() -> None:
    assert input_required.sample("Hi", max_tokens=5, temperature=0.2) == {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 5, "temperature": 0.2},
    }
    assert input_required.elicit_url("Sign in", "https://example.test/login")["params"] == {
        "mode": "url",
        "message": "Sign in",
        "url": "https://example.test/login",
    }
    assert input_required.list_roots() == {"method": "roots/list", "params": {}}
    with pytest.raises(ValueError):
        input_required.sample("Hi", max_tokens=0)
    with pytest.raises(ValueError):
        input_required.elicit_url("Sign in", "javascript:alert(1)")
    with pytest.raises(TypeError):
        input_required.elicit("Q?", 42)  # pyright: ignore[reportArgumentType]


def test_the_revision_schemas_load_at_the_first_ask_not_at_start_up() -> None:
    """Idle RSS: ``mcp_types.methods`` (every revision's schemas, about 6 MB) is imported by the
    first input request, never by building and serving a router that does not ask."""
    code = (
        "import sys\n"
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter\n"
        "router = McpRouter()\n"
        "@router.tool()\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "FastAPI().include_router(router)\n"
        "assert 'mcp_types.methods' not in sys.modules, 'imported at start-up'\n"
        "from fastapi_mcp_ctx._context.asking import _input_required_methods\n"
        "assert 'tools/call' in _input_required_methods() and 'mcp_types.methods' in sys.modules\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
