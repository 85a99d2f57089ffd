"""FastAPI dependency injection inside tools, in both eras.

Depends (sync, async, generator teardown after the result), Security + SecurityScopes,
Request, Header, BackgroundTasks, router- and tool-level dependencies, the per-call cache,
``app.dependency_overrides`` (also on ``mcp_context``), HTTPException 401/403 mapping.
Known faults B09 (background work keeps the request's values), B32 (headers reach the
dependency chain). DESIGN.md decision 3.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import anyio
import pytest
from conftest import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    Wire,
    asgi_exchange,
    assert_error,
    final_message,
    make_app,
    make_router,
    mcp_settings,
    modern_meta,
    open_client,
    result_of,
    rpc,
    tool_text,
)
from fastapi import BackgroundTasks, Depends, FastAPI, Header, HTTPException, Request, Security
from fastapi.security import SecurityScopes

from fastapi_mcp_ctx import Context, McpRouter, ToolError, mcp_context

EVENTS: list[str] = []
COUNTS: dict[str, int] = {}
HOLDER: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    EVENTS.clear()
    COUNTS.clear()
    HOLDER.clear()
    yield


# -- dependencies --------------------------------------------------------------------------


def sync_dep() -> str:
    EVENTS.append("sync")
    return "s"


async def async_dep() -> str:
    EVENTS.append("async")
    return "a"


def gen_dep() -> Iterator[str]:
    EVENTS.append("gen:setup")
    try:
        yield "g"
    finally:
        EVENTS.append("gen:teardown")


async def agen_dep() -> AsyncIterator[str]:
    EVENTS.append("agen:setup")
    try:
        yield "ag"
    finally:
        EVENTS.append("agen:teardown")


def counted() -> int:
    COUNTS["counted"] = COUNTS.get("counted", 0) + 1
    return COUNTS["counted"]


def uses_counted(n: int = Depends(counted)) -> int:
    return n


def get_user(authorization: str | None = Header(default=None)) -> str:
    if authorization is None or not authorization.startswith("Bearer "):
        raise HTTPException(401, "missing token")
    token = authorization.removeprefix("Bearer ")
    if token == "forbidden":
        raise HTTPException(403, "insufficient scope", headers={"WWW-Authenticate": 'Bearer error="insufficient_scope"'})
    if token == "gone":
        raise HTTPException(404, "no such user")
    return f"user:{token}"


def scoped_user(security_scopes: SecurityScopes, user: str = Depends(get_user)) -> dict[str, Any]:
    return {"user": user, "scopes": list(security_scopes.scopes), "scope_str": security_scopes.scope_str}


def router_guard(request: Request) -> None:
    EVENTS.append(f"router-guard:{request.headers.get('x-guard', '-')}")


def tool_guard() -> None:
    EVENTS.append("tool-guard")


def real_dep() -> str:
    return "real"


def build_app() -> FastAPI:
    router = McpRouter(settings=mcp_settings(), dependencies=[Depends(router_guard)])

    @router.tool()
    async def lifecycle(
        x: int,
        s: str = Depends(sync_dep),
        a: str = Depends(async_dep),
        g: str = Depends(gen_dep),
        ag: str = Depends(agen_dep),
    ) -> str:
        """Record dependency order."""
        EVENTS.append(f"handler:{x}")
        return s + a + g + ag

    @router.tool()
    def sync_lifecycle(g: str = Depends(gen_dep)) -> str:
        """A sync tool with a generator dependency (runs in a worker thread)."""
        EVENTS.append("handler")
        return g

    @router.tool()
    async def failing(g: str = Depends(gen_dep)) -> str:
        """Crash after setup."""
        EVENTS.append("handler")
        raise RuntimeError("boom")

    @router.tool()
    async def secured(principal: dict[str, Any] = Security(scoped_user, scopes=["notes:read", "notes:write"])) -> dict[str, Any]:
        """Security with scopes."""
        return principal

    @router.tool()
    async def whoami(user: str = Depends(get_user), x_api_key: str | None = Header(default=None)) -> dict[str, Any]:
        """Header + Depends(get_user)."""
        return {"user": user, "x_api_key": x_api_key}

    @router.tool()
    async def needs_header(x_tenant: str = Header()) -> str:
        """A required header."""
        return x_tenant

    @router.tool()
    async def inspect_request(request: Request) -> dict[str, Any]:
        """Request: headers, client, app.state."""
        return {
            "x_custom": request.headers.get("x-custom"),
            "client_host": request.client.host if request.client else None,
            "app_state": getattr(request.app.state, "marker", None),
            "method": request.method,
        }

    @router.tool()
    async def with_background(background: BackgroundTasks, user: str = Depends(get_user), ctx: Context = Depends(mcp_context)) -> str:
        """Schedule a background task."""

        def after(token_user: str, request_id: Any) -> None:
            exchange = HOLDER.get("exchange")
            EVENTS.append(f"bg:{token_user}:{request_id}:{exchange.done.is_set() if exchange else None}")

        background.add_task(after, user, ctx.request_id)
        EVENTS.append("handler")
        return "scheduled"

    @router.tool(dependencies=[Depends(tool_guard)])
    async def guarded() -> str:
        """Tool-level dependencies."""
        EVENTS.append("handler")
        return "ok"

    @router.tool()
    async def cached(a: int = Depends(counted), b: int = Depends(uses_counted), c: int = Depends(counted)) -> list[int]:
        """The same dependency three times in one call."""
        return [a, b, c]

    @router.tool()
    async def uncached(a: int = Depends(counted), b: int = Depends(counted, use_cache=False)) -> list[int]:
        """use_cache=False runs it again."""
        return [a, b]

    @router.tool()
    async def overridable(value: str = Depends(real_dep), ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Overrides on a dependency and on mcp_context."""
        return {"value": value, "ctx": repr(type(ctx).__name__), "request_id": getattr(ctx, "request_id", None)}

    app = make_app(router)
    app.state.marker = "state-ok"
    return app


@pytest.fixture
def app() -> FastAPI:
    return build_app()


# -- Depends / teardown order ------------------------------------------------------------------


async def test_depends_sync_async_generator_order(wire: Wire, era: str) -> None:
    response = await wire.call_tool(era, "lifecycle", {"x": 7})
    result = result_of(response)
    assert tool_text(result) == "sagag"
    calls = [e for e in EVENTS if not e.startswith("router-guard")]
    assert calls == ["sync", "async", "gen:setup", "agen:setup", "handler:7", "agen:teardown", "gen:teardown"]


async def test_generator_teardown_runs_once_per_call(wire: Wire, era: str) -> None:
    for x in (1, 2):
        result_of(await wire.call_tool(era, "lifecycle", {"x": x}))
    calls = [e for e in EVENTS if e.startswith(("gen", "handler"))]
    assert calls == ["gen:setup", "handler:1", "gen:teardown", "gen:setup", "handler:2", "gen:teardown"]


async def test_generator_teardown_in_sync_tool(wire: Wire, era: str) -> None:
    result_of(await wire.call_tool(era, "sync_lifecycle"))
    assert [e for e in EVENTS if not e.startswith("router")] == ["gen:setup", "handler", "gen:teardown"]


async def test_generator_teardown_runs_when_handler_crashes(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "failing"))
    assert result["isError"] is True
    assert "boom" not in tool_text(result), "a crash's message is withheld from the model"
    assert [e for e in EVENTS if not e.startswith("router")] == ["gen:setup", "handler", "gen:teardown"]


async def test_teardown_happens_before_the_response_completes(app: FastAPI, era: str) -> None:
    """The yield dependency is closed after the result is produced, within the same exchange."""
    params: dict[str, Any] = {"name": "lifecycle", "arguments": {"x": 3}}
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH}
    if era == "modern":
        params["_meta"] = modern_meta()
        headers.update({"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "lifecycle"})
    else:
        async with open_client(app) as client:
            sid = await Wire(client).initialize()
        headers.update({"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
    async with asgi_exchange(app, "POST", headers=headers, body_chunks=[json.dumps(rpc("tools/call", params, 1)).encode()]) as exchange:
        with anyio.fail_after(30):
            await exchange.done.wait()
        assert "gen:teardown" in EVENTS
        message = json.loads(exchange.body)
        assert message["result"]["content"][0]["text"] == "sagag"


# -- Security / SecurityScopes ------------------------------------------------------------------


async def test_security_scopes_visible(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "secured", headers={"authorization": "Bearer abc"}))
    assert result["structuredContent"] == {
        "user": "user:abc",
        "scopes": ["notes:read", "notes:write"],
        "scope_str": "notes:read notes:write",
    }


# -- Request / Header (B32) ---------------------------------------------------------------------


async def test_b32_headers_reach_header_and_depends(wire: Wire, era: str) -> None:
    headers = {"authorization": "Bearer tok-a", "x-api-key": "k1"}
    result = result_of(await wire.call_tool(era, "whoami", headers=headers))
    assert result["isError"] is False
    assert result["structuredContent"] == {"user": "user:tok-a", "x_api_key": "k1"}


async def test_b32_request_dependency_sees_headers_client_and_app_state(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "inspect_request", headers={"x-custom": "hello"}))
    assert result["structuredContent"] == {"x_custom": "hello", "client_host": "127.0.0.1", "app_state": "state-ok", "method": "POST"}


async def test_b32_required_header_present(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "needs_header", headers={"x-tenant": "acme"}))
    assert tool_text(result) == "acme"


async def test_b32_missing_required_header_is_a_clear_tool_error(wire: Wire, era: str) -> None:
    """A dependency failure is an ``isError`` result naming the header, never a silent default."""
    response = await wire.call_tool(era, "needs_header")
    result = result_of(response)
    assert result["isError"] is True
    assert "x-tenant" in tool_text(result).lower()


# -- HTTPException mapping ------------------------------------------------------------------------


async def test_dependency_401_is_http_401_with_www_authenticate(wire: Wire, era: str) -> None:
    if era == "legacy":
        await wire.initialize()
    response = await wire.call_tool(era, "whoami", request_id=41)
    error = assert_error(response, 401, -32001, request_id=41)
    assert response.headers["www-authenticate"].lower().startswith("bearer")
    assert error["message"] == "missing token"


async def test_dependency_403_is_http_403(wire: Wire, era: str) -> None:
    if era == "legacy":
        await wire.initialize()
    response = await wire.call_tool(era, "whoami", headers={"authorization": "Bearer forbidden"}, request_id="f")
    assert_error(response, 403, -32003, request_id="f")
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


async def test_dependency_other_http_error_is_tool_error(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "whoami", headers={"authorization": "Bearer gone"}))
    assert result["isError"] is True
    assert "no such user" in tool_text(result)


# -- BackgroundTasks (B09) ------------------------------------------------------------------------


async def test_background_tasks_run_after_the_response(app: FastAPI, era: str) -> None:
    params: dict[str, Any] = {"name": "with_background", "arguments": {}}
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "authorization": "Bearer bg"}
    if era == "modern":
        params["_meta"] = modern_meta()
        headers.update({"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "with_background"})
    else:
        async with open_client(app) as client:
            sid = await Wire(client).initialize()
        headers.update({"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
    body = json.dumps(rpc("tools/call", params, "bg-1")).encode()
    async with asgi_exchange(app, "POST", headers=headers, body_chunks=[body]) as exchange:
        HOLDER["exchange"] = exchange
        await exchange.wait_for(lambda e: any(x.startswith("bg:") for x in EVENTS))
        assert json.loads(exchange.body)["result"]["content"][0]["text"] == "scheduled"
    handler_index = EVENTS.index("handler")
    bg = [e for e in EVENTS if e.startswith("bg:")]
    assert bg == ["bg:user:bg:bg-1:True"], "the task runs once, after the response body was sent, with the call's values"
    assert EVENTS.index(bg[0]) > handler_index


async def test_b09_background_task_keeps_request_values(wire: Wire, era: str) -> None:
    result_of(await wire.call_tool(era, "with_background", headers={"authorization": "Bearer alice"}, request_id=77))
    assert [e for e in EVENTS if e.startswith("bg:")] == ["bg:user:alice:77:None"]


# -- router-level and tool-level dependencies -------------------------------------------------


async def test_router_and_tool_level_dependencies(wire: Wire, era: str) -> None:
    result_of(await wire.call_tool(era, "guarded", headers={"x-guard": "g1"}))
    assert EVENTS[-3:] == ["router-guard:g1", "tool-guard", "handler"]


async def test_router_dependencies_run_for_every_tool_call(wire: Wire, era: str) -> None:
    result_of(await wire.call_tool(era, "lifecycle", {"x": 1}, headers={"x-guard": "g2"}))
    assert EVENTS[0] == "router-guard:g2"


# -- the per-call dependency cache ---------------------------------------------------------------


async def test_dependency_cache_is_per_call(wire: Wire, era: str) -> None:
    first = result_of(await wire.call_tool(era, "cached"))
    assert first["structuredContent"] == {"result": [1, 1, 1]}
    second = result_of(await wire.call_tool(era, "cached"))
    assert second["structuredContent"] == {"result": [2, 2, 2]}
    assert COUNTS["counted"] == 2


async def test_dependency_use_cache_false(wire: Wire, era: str) -> None:
    result = result_of(await wire.call_tool(era, "uncached"))
    assert result["structuredContent"] == {"result": [1, 2]}


# -- dependency_overrides -----------------------------------------------------------------------


async def test_dependency_overrides_on_normal_dependency(app: FastAPI, wire: Wire, era: str) -> None:
    app.dependency_overrides[real_dep] = lambda: "fake"
    try:
        result = result_of(await wire.call_tool(era, "overridable", request_id=5))
    finally:
        app.dependency_overrides.clear()
    assert result["structuredContent"]["value"] == "fake"
    assert result["structuredContent"]["request_id"] == 5


async def test_dependency_overrides_on_mcp_context(app: FastAPI, wire: Wire, era: str) -> None:
    class FakeContext:
        request_id = "fake-id"

    app.dependency_overrides[mcp_context] = lambda: FakeContext()
    try:
        result = result_of(await wire.call_tool(era, "overridable", request_id=6))
    finally:
        app.dependency_overrides.clear()
    assert result["structuredContent"] == {"value": "real", "ctx": "'FakeContext'", "request_id": "fake-id"}


async def test_overrides_removed_restore_real_dependency(app: FastAPI, wire: Wire, era: str) -> None:
    app.dependency_overrides[real_dep] = lambda: "fake"
    app.dependency_overrides.clear()
    result = result_of(await wire.call_tool(era, "overridable"))
    assert result["structuredContent"]["value"] == "real"


async def test_dependencies_do_not_leak_into_input_schema(wire: Wire, era: str) -> None:
    result = result_of(await wire.request(era, "tools/list"))
    tools = {t["name"]: t for t in result["tools"]}
    assert set(tools["lifecycle"]["inputSchema"]["properties"]) == {"x"}
    assert tools["lifecycle"]["inputSchema"]["required"] == ["x"]
    for name in ("whoami", "secured", "inspect_request", "with_background", "overridable", "needs_header"):
        assert tools[name]["inputSchema"].get("properties", {}) == {}, name
    assert final_message is not None


@pytest.mark.parametrize("outcome", ["returns", "tool_error", "crash", "http_403", "bad_output"])
async def test_background_tasks_run_only_when_the_tool_returned(outcome: str, era: str) -> None:
    """As for a FastAPI path operation: a task added by a handler that then raised (a ToolError,
    a crash, an HTTPException) or broke its own outputSchema never runs; one that returned does."""
    ran: list[str] = []
    router = make_router()

    @router.tool()
    async def schedule(kind: str, tasks: BackgroundTasks) -> int:
        """Add a task, then end as told."""
        tasks.add_task(ran.append, kind)
        if kind == "tool_error":
            raise ToolError("refused")
        if kind == "crash":
            raise RuntimeError("boom")
        if kind == "http_403":
            raise HTTPException(403, "no")
        if kind == "bad_output":
            return "not an int"  # type: ignore[return-value]
        return 1

    async with open_client(make_app(router)) as client:
        response = await Wire(client).call_tool(era, "schedule", {"kind": outcome})
    if outcome == "http_403":
        assert response.status_code == 403
    else:
        assert result_of(response)["isError"] is (outcome != "returns")
    assert ran == (["returns"] if outcome == "returns" else [])


@pytest.mark.parametrize("outcome", ["returns", "bad_output"])
async def test_a_yield_dependency_rolls_back_when_the_output_breaks_its_schema(outcome: str, era: str) -> None:
    """As FastAPI throws ``ResponseValidationError`` into a path operation's yield dependencies,
    an output that breaks the tool's outputSchema is thrown into the tool's: a transaction it
    opened rolls back instead of committing work the model is told failed."""
    events: list[str] = []
    router = make_router()

    async def transaction() -> AsyncIterator[None]:
        try:
            yield
            events.append("commit")
        except Exception as exc:
            events.append(f"rollback({type(exc).__name__})")
            raise

    @router.tool()
    async def write(kind: str, tx: None = Depends(transaction)) -> int:
        """Write, then answer as told."""
        return "not an int" if kind == "bad_output" else 1  # type: ignore[return-value]

    async with open_client(make_app(router)) as client:
        result = result_of(await Wire(client).call_tool(era, "write", {"kind": outcome}))
    if outcome == "returns":
        assert result["isError"] is False and events == ["commit"]
    else:
        assert result["isError"] is True
        assert "does not match its outputSchema" in result["content"][0]["text"]
        assert events == ["rollback(ToolError)"]


async def test_a_yield_dependency_that_swallows_the_exception_is_an_internal_error(era: str, caplog: pytest.LogCaptureFixture) -> None:
    router = make_router()

    async def swallowing() -> AsyncIterator[None]:
        try:
            yield
        except Exception:
            pass  # the mistake: no raise

    @router.tool()
    async def fails(tx: None = Depends(swallowing)) -> int:
        """Raise."""
        raise ToolError("refused")

    async with open_client(make_app(router)) as client:
        result = result_of(await Wire(client).call_tool(era, "fails", {}))
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Tool 'fails' failed with an internal error")
    assert "did not raise it again" in caplog.text


async def test_a_context_parameter_needs_no_marker(era: str) -> None:
    """``ctx: Context`` (FastMCP's and the official SDK's spelling), ``ctx: Context = Depends()``
    and ``Annotated[Context, Depends()]`` all get the call's Context, as ``Depends(mcp_context)``
    does, in tools, resources and prompts; none of them is a tool argument."""

    router = make_router()

    @router.tool()
    async def bare(ctx: Context) -> str:
        """The request id, read through a bare annotation."""
        return str(ctx.request_id)

    @router.tool()
    async def empty_depends(x: int, ctx: Context = Depends()) -> str:  # noqa: B008
        """The request id, read through Depends()."""
        return f"{x}:{ctx.request_id}"

    @router.tool()
    async def annotated(ctx: Annotated[Context, Depends()]) -> str:
        """The request id, read through Annotated."""
        return str(ctx.request_id)

    @router.resource("note://one")
    async def note(ctx: Context) -> str:
        """A resource reading the Context."""
        return f"tenant={ctx.tenant_id}"

    @router.prompt()
    async def greet(who: str, ctx: Context) -> str:
        """A prompt reading the Context."""
        return f"Hello {who} ({ctx.tenant_id})"

    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        tools = {t["name"]: t for t in result_of(await wire.request(era, "tools/list"))["tools"]}
        assert tools["bare"]["inputSchema"].get("properties", {}) == {}
        assert set(tools["empty_depends"]["inputSchema"]["properties"]) == {"x"}
        assert tools["annotated"]["inputSchema"].get("properties", {}) == {}
        for name, arguments, expected in (("bare", {}, ""), ("empty_depends", {"x": 4}, "4:"), ("annotated", {}, "")):
            result = result_of(await wire.call_tool(era, name, arguments))
            assert result["isError"] is False, result
            assert result["structuredContent"]["result"].startswith(expected)
        read = result_of(await wire.request(era, "resources/read", {"uri": "note://one"}))
        assert read["contents"][0]["text"] == "tenant=default"
        prompt = result_of(await wire.request(era, "prompts/get", {"name": "greet", "arguments": {"who": "Ada"}}))
        assert prompt["messages"][0]["content"]["text"] == "Hello Ada (default)"


ITEMS = {1: "one", 2: "two"}


def load_item(item_id: int) -> str:
    """An existing FastAPI dependency: on a path operation ``/items/{item_id}`` it reads the path."""
    return ITEMS[item_id]


async def test_a_dependency_named_like_an_argument_receives_it(era: str) -> None:
    """The tool's arguments are the request's parameters (DESIGN decision 13): the handler and
    its dependency both declare ``item_id``, and both get the call's value (this was an
    ``query.item_id: Field required`` error before, the parameter read from the query string)."""
    router = make_router()

    @router.tool()
    async def show_item(item_id: int, item: str = Depends(load_item)) -> str:
        """Show one item."""
        return f"{item_id}:{item}"

    async with open_client(make_app(router)) as client:
        result = result_of(await Wire(client).call_tool(era, "show_item", {"item_id": 2}))
    assert result["isError"] is False, result
    assert tool_text(result) == "2:two"


async def test_a_sync_tool_reaches_the_context_through_anyio(era: str) -> None:
    """The README's recipe: a sync tool runs in a worker thread and awaits the Context's
    coroutines with ``anyio.from_thread.run`` (a log message and a ctx.state write arrive)."""
    import functools

    import anyio.from_thread

    router = make_router()

    @router.tool()
    def remember(text: str, ctx: Context) -> str:
        """Log and store from a worker thread."""
        anyio.from_thread.run(functools.partial(ctx.log.info, "storing", size=len(text)))
        anyio.from_thread.run(ctx.state.set, "last", text)
        return str(anyio.from_thread.run(ctx.state.get, "last"))

    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        if era == "legacy":
            await wire.request(era, "logging/setLevel", {"level": "info"})
        response = await wire.call_tool(era, "remember", {"text": "hello"})
        assert result_of(response)["structuredContent"] == {"result": "hello"}
        if era == "legacy":
            assert "storing" in response.text
