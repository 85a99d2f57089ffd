"""``McpTestClient`` answers tools that ask for input, in both eras, in process.

2026-07-28: ``input_required`` results answered by the callbacks and retried with
``inputResponses`` + the echoed ``requestState``; 2025: ``elicitation/create``,
``sampling/createMessage``, ``roots/list`` and ``ping`` arriving on the call's SSE stream
while the call is in flight, answered by POSTs on the same session. Known faults: B45 (a
request the client cannot answer fails at once: the refusal envelope), B06 (never a hang).
"""

from __future__ import annotations

import time
from typing import Any, cast

import anyio
import httpx
import pytest
from conftest import make_app, make_router
from fastapi import Depends, FastAPI
from pydantic import BaseModel

from examples.input_required import Dates, Destination, Extras
from examples.input_required import router as example_router
from fastapi_mcp_ctx import Context, ElicitAnswer, input_required, mcp_context
from fastapi_mcp_ctx.testing import Asked, McpResponseError, McpTestClient, TestClientInputError, ToolResult
from fastapi_mcp_ctx.testing._asgi import SseDecoder, messages_of, stream_asgi

ERAS = ["legacy", "modern"]


class Confirm(BaseModel):
    ok: bool


def build_app() -> FastAPI:
    router = make_router(input_max_rounds=3, server_request_timeout_seconds=5.0)

    @router.tool()
    async def pinged(ctx: Context = Depends(mcp_context)) -> str:
        """Pings the client (2025 only), then asks once."""
        if ctx.era == "legacy":
            await ctx.send_request("ping", {})
        answer = await ctx.elicit("Sure?", Confirm)
        return answer.action

    @router.tool()
    async def nag(ctx: Context = Depends(mcp_context)) -> str:
        """Asks forever."""
        ctx.request_input({"again": input_required.elicit("Again?", Confirm)})

    @router.tool()
    async def everything(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Three kinds in one round (ctx.request_input)."""
        views = {key: ctx.inputs.view(key) for key in ("ok", "hi", "roots")}
        if any(v.kind == "none" for v in views.values()):
            ctx.request_input(
                {"ok": input_required.elicit("Ok?", Confirm), "hi": input_required.sample("Say hi", max_tokens=5), "roots": input_required.list_roots()}
            )
        return {"ok": views["ok"].content, "hi": views["hi"].text, "roots": [r["uri"] for r in views["roots"].roots or []]}

    @router.tool()
    async def sign_in(ctx: Context = Depends(mcp_context)) -> str:
        """URL-mode elicitation."""
        view = ctx.inputs.view("login")
        if view.kind == "none":
            ctx.request_input({"login": input_required.elicit_url("Sign in", "https://login.example/x")})
        return f"login {view.action}"

    @router.tool()
    async def in_steps(ctx: Context = Depends(mcp_context)) -> str:
        """A round that asks nothing, carrying only a state (2026: retried with it)."""
        if ctx.inputs.state() is None:
            ctx.request_input(request_state="step-1")
        return f"resumed from {ctx.inputs.state()}"

    @router.tool()
    async def sleepy(ctx: Context = Depends(mcp_context)) -> str:
        """Never finishes within the client's timeout."""
        await anyio.sleep(30)
        return "late"

    app = make_app(router)
    app.include_router(example_router, prefix="/example")
    return app


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return build_app()


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> Any:
    return request.param


WIZARD = {"Where do you want to go?": {"city": "Lisbon"}, "How many nights in Lisbon?": {"nights": 3}, "Any extras?": {"breakfast": False}}


def error_of(result: ToolResult) -> dict[str, Any]:
    assert result.error is not None, result.result
    return result.error


def wizard_answer(params: dict[str, Any]) -> ElicitAnswer[Any]:
    return ElicitAnswer("accept", content=WIZARD[params["message"]])


# -- the wizard, sampling, roots: both eras -------------------------------------------------
async def test_three_question_wizard(app: FastAPI, era: Any) -> None:
    started = time.perf_counter()
    async with McpTestClient(app, era=era, path="/example/mcp", elicitation=wizard_answer) as client:
        result = await client.call_tool("trip_wizard")
    assert not result.is_error and result.error is None, result.result
    assert result.structured == {"city": "Lisbon", "nights": 3, "breakfast": False}
    assert [a.params["message"] for a in result.asked] == list(WIZARD)
    assert {a.method for a in result.asked} == {"elicitation/create"}
    assert [a.answer for a in result.asked] == [{"action": "accept", "content": c} for c in WIZARD.values()]
    assert result.rounds == 3 and [a.round for a in result.asked] == [1, 2, 3]
    if era == "modern":  # the keys the awaitable helpers give, in call order
        assert [a.key for a in result.asked] == ["elicit-1", "elicit-2", "elicit-3"]
    else:
        assert [a.key for a in result.asked] == [None, None, None]
    assert time.perf_counter() - started < 5


async def test_callbacks_may_be_async_and_return_models(app: FastAPI, era: Any) -> None:
    models: dict[str, BaseModel] = {
        "Where do you want to go?": Destination(city="Porto"),
        "How many nights in Porto?": Dates(nights=2),
        "Any extras?": Extras(breakfast=True),
    }

    async def answer(params: dict[str, Any]) -> BaseModel:
        await anyio.sleep(0)
        return models[params["message"]]

    async with McpTestClient(app, era=era, path="/example/mcp", elicitation=answer) as client:
        result = await client.call_tool("trip_wizard")
    assert result.structured == {"city": "Porto", "nights": 2, "breakfast": True}
    assert [a.answer["content"] for a in result.asked] == [{"city": "Porto"}, {"nights": 2}, {"breakfast": True}]


async def test_sampling_tool(app: FastAPI, era: Any) -> None:
    prompts: list[str] = []

    def llm(params: dict[str, Any]) -> str:
        prompts.append(params["messages"][0]["content"]["text"])
        assert params["maxTokens"] == 100
        return "A short line."

    async with McpTestClient(app, era=era, path="/example/mcp", sampling=llm) as client:
        result = await client.call_tool("summarize", {"text": "a long text"})
    assert result.text == "A short line."
    assert prompts == ["Summarise in one line: a long text"]
    assert result.asked[0].method == "sampling/createMessage"
    assert result.asked[0].answer["model"] == "mcp-test-client"


@pytest.mark.parametrize("roots", [["file:///projects/a", {"uri": "file:///projects/b", "name": "b"}], lambda _: ["file:///projects/a", "file:///projects/b"]])
async def test_roots_tool_list_or_callback(app: FastAPI, era: Any, roots: Any) -> None:
    async with McpTestClient(app, era=era, path="/example/mcp", roots=roots) as client:
        result = await client.call_tool("project_roots")
    assert result.structured == {"result": ["file:///projects/a", "file:///projects/b"]}
    assert [a.method for a in result.asked] == ["roots/list"]


async def test_three_kinds_in_one_round(app: FastAPI, era: Any) -> None:
    async with McpTestClient(
        app, era=era, elicitation=lambda _: Confirm(ok=True), sampling=lambda _: "hi!", roots=["file:///r"]
    ) as client:
        result = await client.call_tool("everything")
    assert result.structured == {"ok": {"ok": True}, "hi": "hi!", "roots": ["file:///r"]}
    assert sorted(a.method for a in result.asked) == ["elicitation/create", "roots/list", "sampling/createMessage"]
    assert result.rounds == (1 if era == "modern" else 3)


async def test_url_mode_elicitation(app: FastAPI, era: Any) -> None:
    seen: list[dict[str, Any]] = []

    def consent(params: dict[str, Any]) -> ElicitAnswer[Any]:
        seen.append(params)
        return ElicitAnswer("accept")

    async with McpTestClient(app, era=era, elicitation=consent) as client:
        result = await client.call_tool("sign_in")
    assert result.text == "login accept"
    assert seen[0]["mode"] == "url" and seen[0]["url"] == "https://login.example/x"
    assert ("elicitationId" in seen[0]) is (era == "legacy")  # 2025 adds the id it requires


# -- declines, refusals ----------------------------------------------------------------------
async def test_decline(app: FastAPI, era: Any) -> None:
    async with McpTestClient(app, era=era, path="/example/mcp", elicitation=lambda _: ElicitAnswer("decline")) as client:
        result = await client.call_tool("trip_wizard")
    assert result.is_error
    assert "stopped at the destination" in result.text
    assert [a.answer for a in result.asked] == [{"action": "decline"}]


async def test_undeclared_capability_is_refused(app: FastAPI) -> None:
    """B45: a client that did not declare elicitation is refused at once, nothing asked."""
    async with McpTestClient(app, path="/example/mcp") as legacy:
        result = await legacy.call_tool("export_report", {"report_id": "r1"})
    assert result.is_error and result.asked == ()
    error = error_of(result)
    assert error["code"] == -32600
    assert error["data"]["reason"] == "client_capability_missing"
    assert "elicitation" in error["data"]["requiredCapabilities"]
    assert "Or call again with format supplied." in error["data"]["recovery"]["hint"]
    async with McpTestClient(app, era="modern", path="/example/mcp", sampling=lambda _: "x") as modern:
        with pytest.raises(McpResponseError) as caught:
            await modern.call_tool("export_report", {"report_id": "r1"})
    assert caught.value.code == -32021 and caught.value.http_status == 400
    assert "elicitation" in caught.value.data["requiredCapabilities"]


async def test_declared_but_unanswered_is_a_clear_error(app: FastAPI, era: Any) -> None:
    caps = {"elicitation": {"form": {}}}
    async with McpTestClient(app, era=era, path="/example/mcp", client_capabilities=caps) as client:
        with pytest.raises(TestClientInputError, match=r"elicitation/create.*McpTestClient\(elicitation=\.\.\.\)"):
            await client.call_tool("export_report", {"report_id": "r1"})


# -- the raw wire, bounds ----------------------------------------------------------------------
async def test_modern_raw_input_required_and_manual_retry(app: FastAPI) -> None:
    async with McpTestClient(app, era="modern", path="/example/mcp", elicitation=lambda _: {"action": "accept", "content": {"format": "csv"}}) as client:
        first = await client.call_tool("export_report", {"report_id": "r1"}, auto_answer=False)
        assert first.input_required and first.asked == () and first.rounds == 0
        assert first.result["inputRequests"]["format"]["method"] == "elicitation/create"
        assert isinstance(first.result["requestState"], str)
        answers = {"format": {"action": "accept", "content": {"format": "json"}}}
        second = await client.call_tool("export_report", {"report_id": "r1"}, input_responses=answers, request_state=first.result["requestState"])
        assert second.structured == {"url": "https://reports.example/r1.json"}
        automatic = await client.call_tool("export_report", {"report_id": "r1"})
        assert automatic.structured == {"url": "https://reports.example/r1.csv"} and automatic.rounds == 1


async def test_modern_state_only_round_is_retried_with_the_state(app: FastAPI) -> None:
    async with McpTestClient(app, era="modern") as client:
        raw = await client.call_tool("in_steps", auto_answer=False)
        assert raw.input_required and "inputRequests" not in raw.result
        result = await client.call_tool("in_steps")
    assert result.text == "resumed from step-1" and result.asked == () and result.rounds == 0


async def test_modern_rounds_are_bounded(app: FastAPI) -> None:
    async with McpTestClient(app, era="modern", elicitation=lambda _: Confirm(ok=True), max_input_rounds=4) as client:
        with pytest.raises(TestClientInputError, match="still input_required after 4 answered rounds"):
            await client.call_tool("nag")


async def test_legacy_rounds_are_bounded_by_the_server(app: FastAPI) -> None:
    async with McpTestClient(app, elicitation=lambda _: Confirm(ok=True)) as client:
        result = await client.call_tool("nag")
    assert result.is_error and error_of(result)["data"]["reason"] == "input_rounds_exceeded"
    assert len(result.asked) == 3


async def test_legacy_ping_is_answered_and_not_recorded(app: FastAPI) -> None:
    async with McpTestClient(app, elicitation=lambda _: ElicitAnswer("cancel")) as client:
        result = await client.call_tool("pinged")
    assert result.text == "cancel"
    assert [a.method for a in result.asked] == ["elicitation/create"]


async def test_a_tool_that_never_answers_times_out(app: FastAPI, era: Any) -> None:
    started = time.perf_counter()
    async with McpTestClient(app, era=era, timeout=0.3) as client:
        with pytest.raises(TimeoutError, match=r"tools/call: no answer from the app within 0\.3 s"):
            await client.call_tool("sleepy")
        assert await client.list_tools()  # the client stays usable
    assert time.perf_counter() - started < 5


async def test_a_callback_that_hangs_times_out(app: FastAPI) -> None:
    async def stuck(_: dict[str, Any]) -> ElicitAnswer[Any]:
        await anyio.sleep(30)
        raise AssertionError("unreachable")

    async with McpTestClient(app, path="/example/mcp", elicitation=stuck, timeout=0.3) as client:
        with pytest.raises(TimeoutError):
            await client.call_tool("trip_wizard")


def test_auto_capabilities_and_explicit_override() -> None:
    client = McpTestClient(FastAPI(), elicitation=lambda _: ElicitAnswer("cancel"), sampling=lambda _: "x", roots=[])
    assert client.client_capabilities == {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": False}}
    narrowed = McpTestClient(FastAPI(), elicitation=lambda _: ElicitAnswer("cancel"), client_capabilities={"elicitation": {"form": {}}})
    assert narrowed.client_capabilities == {"elicitation": {"form": {}}}
    assert McpTestClient(FastAPI()).client_capabilities == {}
    with pytest.raises(TypeError, match="roots="):
        McpTestClient(FastAPI(), roots="file:///x")


async def test_wrong_callback_return_is_a_type_error(app: FastAPI) -> None:
    async with McpTestClient(app, era="modern", path="/example/mcp", sampling=lambda _: 42) as client:  # type: ignore[arg-type,return-value]
        with pytest.raises(TypeError, match="sampling callback returns a string"):
            await client.call_tool("summarize", {"text": "t"})


def test_asked_is_a_plain_record() -> None:
    asked = Asked("roots/list", {}, {"roots": []}, "roots", 2)
    assert (asked.method, asked.key, asked.round) == ("roots/list", "roots", 2)


def test_sse_decoding_across_chunks() -> None:
    decoder = SseDecoder()
    assert decoder.feed('event: message\r\ndata: {"a":') == []
    assert decoder.feed(' 1}\r\n\r\ndata: {"b": 2}\n\n: comment\n\n') == ['{"a": 1}', '{"b": 2}']
    assert messages_of("application/json", b'{"jsonrpc": "2.0", "id": 1, "result": {}}') == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert messages_of("application/json", b"not json") == [] and messages_of("text/plain", b"") == []


async def test_concurrent_legacy_calls_each_get_their_answers(app: FastAPI) -> None:
    results: dict[str, Any] = {}

    def answer(params: dict[str, Any]) -> ElicitAnswer[Any]:
        if params["message"] == "Where do you want to go?":
            return ElicitAnswer("accept", content={"city": "Oslo"})
        return ElicitAnswer("accept", content=WIZARD.get(params["message"]) or {"nights": 1})

    async with McpTestClient(app, path="/example/mcp", elicitation=answer) as client:

        async def one(name: str) -> None:
            results[name] = await client.call_tool("trip_wizard")

        async with anyio.create_task_group() as group:
            for name in ("a", "b", "c"):
                group.start_soon(one, name)
    assert {name: r.structured for name, r in results.items()} == {n: {"city": "Oslo", "nights": 1, "breakfast": False} for n in "abc"}
    assert all(len(r.asked) == 3 for r in results.values())


# -- the streaming transport itself -------------------------------------------------------------
async def test_stream_asgi_hands_over_chunks_as_they_are_sent() -> None:
    release = anyio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["body"] == b"ping"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await release.wait()  # a buffering transport would never return the first chunk
        await send({"type": "http.response.body", "body": b"second", "more_body": False})

    request = httpx.Request("POST", "http://127.0.0.1/x", content=b"ping")
    with anyio.fail_after(5):
        async with stream_asgi(cast(Any, app), request) as streamed:
            chunks = streamed.aiter_bytes()
            assert streamed.status == 200 and await anext(chunks) == b"first"
            release.set()
            assert [chunk async for chunk in chunks] == [b"second"]


async def test_stream_asgi_raises_the_apps_errors() -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise LookupError("no route")

    async def silent(scope: Any, receive: Any, send: Any) -> None:
        return None

    request = httpx.Request("GET", "http://127.0.0.1/x")
    with pytest.raises(LookupError, match="no route"):
        async with stream_asgi(cast(Any, broken), request):
            pass
    with pytest.raises(RuntimeError, match="returned without sending a response"):
        async with stream_asgi(cast(Any, silent), request):
            pass


async def test_stream_asgi_disconnects_and_cancels_an_app_left_running() -> None:
    seen: list[str] = []

    async def endless(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        try:
            await receive()  # the body
            seen.append((await receive())["type"])  # then the client leaving
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    started = time.perf_counter()
    async with stream_asgi(cast(Any, endless), httpx.Request("GET", "http://127.0.0.1/x"), grace=0.1):
        pass
    assert seen == ["http.disconnect", "cancelled"] and time.perf_counter() - started < 2
