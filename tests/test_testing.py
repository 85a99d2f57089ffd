"""``fastapi_mcp_ctx.testing``: the public in-process test client and ``reset_state``.

Every test drives a real app through ``McpTestClient`` in both eras where the behaviour is
era-independent, and checks the wire the client produced (headers, envelope, session) by
what the server did with it, not by mocking the server.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, get_args

import anyio
import fakeredis
import pytest
from conftest import make_app, make_router, mcp_settings
from fastapi import Depends, FastAPI, Header, HTTPException, Request
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

import fastapi_mcp_ctx
from fastapi_mcp_ctx import Context, McpRouter, Principal, mcp_context, testing
from fastapi_mcp_ctx._wire.envelope import decode_header_value, encode_header_value
from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.errors import McpResponseError
from fastapi_mcp_ctx.state import ContextState
from fastapi_mcp_ctx.testing import McpResponse, McpTestClient, ToolResult, reset_state

ERAS = ["legacy", "modern"]
NOTES: list[str] = []


def get_db() -> Iterator[list[str]]:
    yield NOTES


def build_router(**settings: Any) -> McpRouter:
    router = make_router(**settings)

    @router.tool()
    async def add_note(text: str, db: list[str] = Depends(get_db)) -> int:
        """Store a note; returns the number of notes."""
        db.append(text)
        return len(db)

    @router.tool()
    async def count(n: int, ctx: Context = Depends(mcp_context)) -> str:
        """Count to n with progress and logs."""
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
            await ctx.log.info("counted", value=i)
        await ctx.log.debug("done")
        return f"counted to {n}"

    @router.tool()
    async def remember(key: str, value: int, ctx: Context = Depends(mcp_context)) -> int | None:
        """Keep value under key in ctx.state; returns the value it replaces."""
        previous = await ctx.state.get(key, int)
        await ctx.state.set(key, value)
        return previous

    @router.tool()
    async def regional(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], n: int = 0) -> str:
        """A string argument mirrored in Mcp-Param-Region."""
        return f"{region}:{n}"

    @router.tool()
    async def whoami(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """What the server saw of the client."""
        return {
            "era": ctx.era,
            "version": ctx.protocol_version,
            "session": ctx.session_id,
            "client": dict(ctx.client_info or {}),
            "sampling": ctx.client.can("sampling"),
            "progress_token": ctx.progress_token,
            "trace_id": ctx.trace_id,
        }

    @router.tool()
    async def crash() -> str:
        """Always crashes."""
        raise RuntimeError("secret detail")

    @router.tool()
    async def sleepy() -> str:
        """Never answers in time."""
        await anyio.sleep(30)
        return "late"

    return router


@pytest.fixture
def router() -> McpRouter:
    NOTES.clear()
    return build_router()


@pytest.fixture
def app(router: McpRouter) -> FastAPI:
    return make_app(router)


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> Any:
    return request.param


# -- the public surface -----------------------------------------------------------------------


def test_exported_members() -> None:
    """Like httpx's test_exported_members: ``testing.__all__`` is exactly the documented names."""
    assert testing.__all__ == [
        "TASKS_CAPABILITY",
        "Asked",
        "Era",
        "McpResponse",
        "McpResponseError",
        "McpTestClient",
        "TestClientInputError",
        "TestClientTaskError",
        "ToolResult",
        "reset_state",
    ]
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name
    for name in ("Asked", "McpResponse", "McpTestClient", "ToolResult", "reset_state"):
        member = getattr(testing, name)
        assert member.__doc__ and member.__module__ == "fastapi_mcp_ctx.testing", name
    assert get_args(testing.Era) == ("legacy", "modern")
    assert testing.McpResponseError is McpResponseError and McpResponseError.__doc__
    assert testing.TestClientInputError is fastapi_mcp_ctx.errors.TestClientInputError and testing.TestClientInputError.__doc__
    assert "testing" not in fastapi_mcp_ctx.__all__
    assert not set(testing.__all__) & set(fastapi_mcp_ctx.__all__)
    namespace: dict[str, Any] = {}
    exec("from fastapi_mcp_ctx.testing import *", namespace)  # noqa: S102
    assert set(testing.__all__) <= set(namespace)


# -- both eras: tools, results, notifications ---------------------------------------------------


async def test_list_and_call_in_both_eras(app: FastAPI, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        names = [tool["name"] for tool in await client.list_tools()]
        first = await client.call_tool("add_note", {"text": "a"})
        second = await client.call_tool("add_note", {"text": "b"})
    assert names == ["add_note", "count", "remember", "regional", "whoami", "crash", "sleepy"]
    assert isinstance(first, ToolResult) and first.is_error is False
    assert (first.structured, second.structured) == ({"result": 1}, {"result": 2})
    assert (first.text, second.text) == ("1", "2")
    assert first.content == [{"type": "text", "text": "1"}]
    assert first.http_status == 200 and first.notifications == []
    assert NOTES == ["a", "b"]


async def test_legacy_handshake_session_and_delete(app: FastAPI) -> None:
    async with McpTestClient(app, client_capabilities={"sampling": {}}) as client:
        session = client.session_id
        assert session and client.initialize_result is not None
        assert client.initialize_result["serverInfo"]["name"] == "test-server"
        seen = (await client.call_tool("whoami")).structured
        http = client.http
    assert seen["era"] == "legacy" and seen["version"] == "2025-11-25" and seen["session"] == session
    assert seen["client"]["name"] == "fastapi-mcp-ctx-testing" and seen["sampling"] is True
    assert client.session_id is None, "the session is deleted on exit"
    assert http.is_closed
    async with McpTestClient(app) as other:  # the ended session id is refused now
        response = await other.http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25", "Accept": "application/json"},
        )
    assert response.status_code == 404


async def test_modern_envelope_and_headers(app: FastAPI) -> None:
    async with McpTestClient(app, era="modern", client_capabilities={"sampling": {}}, client_info={"name": "x", "version": "9"}) as client:
        assert client.session_id is None and client.initialize_result is None
        seen = (await client.call_tool("whoami", progress_token="p-1", meta={"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"})).structured
        discover = await client.request("server/discover")
    assert seen == {
        "era": "modern",
        "version": "2026-07-28",
        "session": None,
        "client": {"name": "x", "version": "9"},
        "sampling": True,
        "progress_token": "p-1",
        "trace_id": "a" * 32,
    }
    assert isinstance(discover, McpResponse) and "2026-07-28" in discover.result["supportedVersions"]


async def test_progress_and_logs_per_call_and_overall(app: FastAPI, era: Any) -> None:
    async with McpTestClient(app, era=era, log_level="info") as client:
        first = await client.call_tool("count", {"n": 2}, progress_token="tok")
        second = await client.call_tool("count", {"n": 1})
        assert [p["progress"] for p in first.progress] == [1, 2]
        assert first.progress[0] == {"progressToken": "tok", "progress": 1, "total": 2, "message": "step 1"}
        assert [entry["data"]["value"] for entry in first.logs] == [1, 2], "debug is below the chosen level"
        assert all(entry["level"] == "info" for entry in first.logs)
        assert second.progress == [] and len(second.logs) == 1, "no progress without a token"
        assert first.headers["content-type"].startswith("text/event-stream")
        assert [p["progress"] for p in client.progress] == [1, 2]
        assert [entry["data"]["value"] for entry in client.logs] == [1, 2, 1]
        assert len(client.notifications) == 5
        assert first.structured == {"result": "counted to 2"}


async def test_log_level_defaults_follow_each_era(app: FastAPI) -> None:
    async with McpTestClient(app) as legacy:
        assert [e["level"] for e in (await legacy.call_tool("count", {"n": 1})).logs] == ["info", "debug"]
    async with McpTestClient(app, era="modern") as modern:
        assert (await modern.call_tool("count", {"n": 1})).logs == [], "2026: no logs unless _meta asks"


async def test_tool_failures_are_results_not_exceptions(app: FastAPI, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        crashed = await client.call_tool("crash")
        invalid = await client.call_tool("add_note", {"text": 5})
    assert crashed.is_error and "secret detail" not in crashed.text
    assert invalid.is_error and "text" in invalid.text


# -- errors ----------------------------------------------------------------------------------------


async def test_protocol_error_raises_typed_error_with_http_status(app: FastAPI, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        with pytest.raises(McpResponseError) as caught:
            await client.call_tool("no_such_tool")
    error = caught.value
    assert error.code == -32602 and error.method == "tools/call" and error.message
    assert error.http_status == (400 if era == "modern" else 200), "2025 era answers JSON-RPC errors with 200"
    assert "-32602" in str(error)


async def test_modern_unsupported_version_carries_data(app: FastAPI) -> None:
    async with McpTestClient(app, era="modern", protocol_version="2099-01-01", validate=False) as client:
        with pytest.raises(McpResponseError) as caught:
            await client.list_tools()
    assert caught.value.code == -32022 and caught.value.http_status == 400
    assert caught.value.data["requested"] == "2099-01-01" and "2026-07-28" in caught.value.data["supported"]


async def test_http_error_without_json_rpc_body(app: FastAPI, era: Any) -> None:
    async with McpTestClient(app, era="modern", path="/elsewhere") as client:
        with pytest.raises(McpResponseError) as caught:
            await client.list_tools()
    assert caught.value.code is None and caught.value.http_status == 404 and "Not Found" in caught.value.message


async def test_notify(app: FastAPI, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        await client.notify("notifications/cancelled", {"requestId": 99, "reason": "test"})
    async with McpTestClient(app, era="modern", protocol_version="1999-01-01") as client:
        with pytest.raises(McpResponseError) as caught:
            await client.notify("notifications/cancelled", {"requestId": 1})
    assert caught.value.code == -32022 and caught.value.http_status == 400


async def test_timeout_is_bounded(app: FastAPI) -> None:
    async with McpTestClient(app, era="modern", timeout=0.3) as client:
        with anyio.fail_after(5), pytest.raises(TimeoutError, match=r"within 0\.3 s"):
            await client.call_tool("sleepy")


async def test_not_entered_is_a_clear_error(app: FastAPI) -> None:
    client = McpTestClient(app)
    with pytest.raises(RuntimeError, match="async with"):
        await client.list_tools()
    with pytest.raises(ValueError, match="era"):
        McpTestClient(app, era="2026")  # type: ignore[arg-type]


# -- Mcp-Param-* and Mcp-Name --------------------------------------------------------------------


async def test_mcp_param_headers_mirror_listed_tools(app: FastAPI) -> None:
    async with McpTestClient(app, era="modern") as client:
        with pytest.raises(McpResponseError) as caught:  # not listed yet: the server wants the header
            await client.call_tool("regional", {"region": "eu"})
        assert caught.value.code == -32020 and "mcp-param-region" in caught.value.message.lower()
        await client.list_tools()
        plain = await client.call_tool("regional", {"region": "eu-west", "n": 3})
        encoded = await client.call_tool("regional", {"region": " Zürich "})  # base64 sentinel on the wire
    assert plain.structured == {"result": "eu-west:3"}
    assert encoded.structured == {"result": " Zürich :0"}


# -- dependency overrides and authenticate ---------------------------------------------------------


async def test_yield_dependency_override(app: FastAPI, era: Any) -> None:
    fake: list[str] = ["x"]

    def fake_db() -> Iterator[list[str]]:
        yield fake

    app.dependency_overrides[get_db] = fake_db
    try:
        async with McpTestClient(app, era=era) as client:
            result = await client.call_tool("add_note", {"text": "y"})
    finally:
        app.dependency_overrides.clear()
    assert result.structured == {"result": 2} and fake == ["x", "y"] and NOTES == []


async def test_lambda_iter_override_hands_the_tool_an_iterator(app: FastAPI) -> None:
    """The old guide's ``lambda: iter([FAKE])`` is not a yield dependency: the tool gets an iterator."""
    app.dependency_overrides[get_db] = lambda: iter([["x"]])
    try:
        async with McpTestClient(app, era="modern") as client:
            result = await client.call_tool("add_note", {"text": "y"})
    finally:
        app.dependency_overrides.clear()
    assert result.is_error, "list_iterator has no append: the tool crashes"


def authenticate(x_api_key: str | None = Header(default=None)) -> Principal | None:
    if x_api_key is None:
        return None
    if not x_api_key.startswith("key-"):
        raise HTTPException(401, "invalid API key")
    return Principal(subject=x_api_key.removeprefix("key-"), tenant_id="acme")


def auth_app() -> FastAPI:
    router = McpRouter(settings=mcp_settings(), authenticate=authenticate)

    @router.tool()
    async def me(ctx: Context = Depends(mcp_context)) -> str:
        """The caller's subject."""
        return f"{ctx.auth.subject}@{ctx.tenant_id}"

    return make_app(router)


async def test_authenticate_sees_client_headers(era: Any) -> None:
    async with McpTestClient(auth_app(), era=era, headers={"X-API-Key": "key-ada"}) as client:
        assert (await client.call_tool("me")).structured == {"result": "ada@acme"}


async def test_call_headers_override_client_headers() -> None:
    async with McpTestClient(auth_app(), era="modern", headers={"X-API-Key": "key-ada"}) as client:
        assert (await client.call_tool("me", headers={"X-API-Key": "key-bob"})).structured == {"result": "bob@acme"}
    async with McpTestClient(auth_app(), headers={"X-API-Key": "key-ada"}) as client:
        with pytest.raises(McpResponseError) as caught:  # a 2025 session belongs to its caller
            await client.call_tool("me", headers={"X-API-Key": "key-bob"})
    assert caught.value.http_status == 404


async def test_authenticate_refusals_raise(era: Any) -> None:
    app = auth_app()
    with pytest.raises(McpResponseError) as missing:
        async with McpTestClient(app, era=era) as client:
            await client.list_tools()
    assert missing.value.http_status == 401 and "www-authenticate" not in missing.value.headers  # X-API-Key: no Bearer
    with pytest.raises(McpResponseError) as invalid:
        async with McpTestClient(app, era=era, headers={"X-API-Key": "nope"}) as client:
            await client.list_tools()
    assert invalid.value.http_status == 401 and invalid.value.method == ("initialize" if era == "legacy" else "tools/list")


async def test_authenticate_can_be_overridden(era: Any) -> None:
    app = auth_app()
    app.dependency_overrides[authenticate] = lambda: Principal(subject="test-user", tenant_id="t1")
    try:
        async with McpTestClient(app, era=era) as client:  # no API key needed any more
            assert (await client.call_tool("me")).structured == {"result": "test-user@t1"}
    finally:
        app.dependency_overrides.clear()


# -- lifespan (B34) --------------------------------------------------------------------------------


def lifespan_app(events: list[str]) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        events.append("startup")
        yield {"pool": "ready"}
        events.append("shutdown")

    router = make_router()

    @router.tool()
    async def uses_pool(request: Request) -> str:
        """Read the pool the lifespan opened (lifespan state)."""
        return str(getattr(request.state, "pool", None))

    app = FastAPI(lifespan=lifespan)
    app.include_router(router)
    return app


async def test_b34_lifespan_runs_and_its_state_reaches_tools(era: Any) -> None:
    events: list[str] = []
    app = lifespan_app(events)
    async with McpTestClient(app, era=era, lifespan=True) as client:
        assert events == ["startup"]
        assert (await client.call_tool("uses_pool")).structured == {"result": "ready"}
    assert events == ["startup", "shutdown"]
    async with McpTestClient(app, era=era) as client:  # off by default: nothing ran
        assert (await client.call_tool("uses_pool")).structured == {"result": "None"}
    assert events == ["startup", "shutdown"]


# -- stateless 2025 mode ---------------------------------------------------------------------------


async def test_legacy_stateless_mode_has_no_session() -> None:
    app = make_app(build_router(session_mode="stateless"))
    async with McpTestClient(app) as client:
        assert client.session_id is None
        assert (await client.call_tool("add_note", {"text": "s"})).structured == {"result": 1}


# -- reset_state -----------------------------------------------------------------------------------


async def test_reset_state_between_tests(app: FastAPI, router: McpRouter, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        assert (await client.call_tool("remember", {"key": "k", "value": 1})).structured == {"result": None}
        assert (await client.call_tool("remember", {"key": "k", "value": 2})).structured == {"result": 1}
        assert await client.reset_state() == 1
        assert (await client.call_tool("remember", {"key": "k", "value": 3})).structured == {"result": None}
    assert client.router is router
    assert await reset_state(router) == 1
    assert await reset_state(router) == 0


async def test_reset_state_of_one_tenant() -> None:
    router = McpRouter(settings=mcp_settings())
    for tenant in ("acme", "globex", "a/b"):
        await ContextState(router.state_backend, tenant).set_many({f"k{i}": i for i in range(3)})
    assert await reset_state(router, tenant_id="globex") == 3
    assert await ContextState(router.state_backend, "acme").get_many(["k0", "k1", "k2"]) == {"k0": 0, "k1": 1, "k2": 2}
    assert await reset_state(router) == 6


async def test_client_reset_state_before_any_request_finds_the_apps_router(app: FastAPI, router: McpRouter) -> None:
    await ContextState(router.state_backend, "default").set("k", 1)
    async with McpTestClient(app, era="modern") as client:  # the 2026 era sends nothing on open
        assert client.router is None
        assert await client.reset_state() == 1


async def test_client_reset_state_with_several_routers_asks_which() -> None:
    app = FastAPI()
    app.include_router(McpRouter(settings=mcp_settings()), prefix="/one")
    app.include_router(McpRouter(settings=mcp_settings()), prefix="/two")
    async with McpTestClient(app, era="modern", path="/one/mcp") as client:
        with pytest.raises(RuntimeError, match=r"found: /one/mcp, /two/mcp.*reset_state\(mcp_router\)"):
            await client.reset_state()


async def test_reset_state_refuses_persistent_backends_unless_allowed(tmp_path: Path) -> None:
    backend = SqlBackend(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}", create_tables=True)
    router = McpRouter(settings=mcp_settings(), state_backend=backend)
    try:
        await ContextState(backend, "acme").set_many({f"n/{i}": i for i in range(1203)})
        with pytest.raises(RuntimeError, match="allow_persistent=True"):
            await reset_state(router)
        assert await reset_state(router, allow_persistent=True) == 1203, "paged: more keys than one scan page"
        assert await backend.scan("", None, 10) == []
    finally:
        await backend.aclose()


async def test_reset_state_on_redis_clears_only_its_namespace() -> None:
    server = fakeredis.FakeServer()
    mine = RedisBackend(client=fakeredis.FakeAsyncRedis(server=server, decode_responses=True), namespace="mine:")
    theirs = RedisBackend(client=fakeredis.FakeAsyncRedis(server=server, decode_responses=True), namespace="theirs:")
    try:
        await ContextState(mine, "acme").set("k", 1)
        await ContextState(theirs, "acme").set("k", 2)
        router = McpRouter(settings=mcp_settings(), state_backend=mine)
        assert await reset_state(router, allow_persistent=True) == 1
        assert await ContextState(theirs, "acme").get("k") == 2
    finally:
        await mine.aclose()
        await theirs.aclose()


# -- the header codec the client uses --------------------------------------------------------------


@given(st.text(max_size=60))
def test_encoded_header_values_decode_to_themselves(value: str) -> None:
    encoded = encode_header_value(value)
    assert re.fullmatch(r"[\x20-\x7e]*", encoded), "a header value is printable ASCII"
    assert decode_header_value(encoded) == value


def test_plain_values_stay_literal() -> None:
    assert encode_header_value("add_note") == "add_note"
    assert encode_header_value("a b") == "a b"
    assert encode_header_value(" a").startswith("=?base64?")
    assert encode_header_value("=?base64?YWRk?=") != "=?base64?YWRk?=", "a literal that looks encoded is encoded"


async def test_concurrent_calls_match_their_own_answers(app: FastAPI, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        results: dict[int, ToolResult] = {}

        async def call(n: int) -> None:
            results[n] = await client.call_tool("count", {"n": n}, progress_token=f"t{n}")

        async with anyio.create_task_group() as tg:
            for n in (1, 2, 3, 4):
                tg.start_soon(call, n)
    for n, result in results.items():
        assert result.structured == {"result": f"counted to {n}"}
        assert [p["progressToken"] for p in result.progress] == [f"t{n}"] * n



async def test_the_client_finds_a_router_under_a_prefix_or_a_mount() -> None:
    """Without ``path=`` the client uses the app's one McpRouter (as ``stdio`` finds it): under
    ``include_router(prefix=...)`` and in a mounted app; several routers, none at ``/mcp``, ask for ``path=``; a
    wrong path is a 404 whose message says to pass it."""
    router = McpRouter(settings=mcp_settings())
    app = FastAPI()
    app.include_router(router, prefix="/api")
    async with McpTestClient(app) as client:
        assert client.path == "/api/mcp" and (await client.request("ping")).result == {}
    outer = FastAPI()
    outer.mount("/tools", app)
    async with McpTestClient(outer, era="modern") as client:
        assert client.path == "/tools/api/mcp" and (await client.list_tools()) == []
    outer.include_router(McpRouter(settings=mcp_settings()), prefix="/v2")
    with pytest.raises(ValueError, match=r"several McpRouters \(/tools/api/mcp, /v2/mcp\).*path="):
        McpTestClient(outer)
    outer.include_router(McpRouter(settings=mcp_settings()))
    assert McpTestClient(outer).path == "/mcp"  # several, one of them at the default path: that one
    with pytest.raises(McpResponseError) as caught:
        async with McpTestClient(app, path="/mcp"):
            pass
    assert caught.value.http_status == 404 and "path=" in str(caught.value) and "/mcp" in str(caught.value)
