"""Resources: registration, lookup, contents, pagination, errors, subscriptions, both eras.

Known faults: B37 (cursors bound to their list), B40 (optional query variables reach the
handler), B41 (bytes become strict base64 once, text stays text), B42 (era-aware not-found,
malformed URIs -32602, crashes -32603), B44 (subscriptions feed the per-session registry).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from conftest import Wire, open_client, result_of
from fastapi import Depends, FastAPI, Header, HTTPException, Security
from fastapi.security import APIKeyHeader
from notify_app import build, frames, get_stream, methods, tenant_auth, wait_frames
from starlette.requests import Request

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context
from fastapi_mcp_ctx._transport.subscriptions import SessionAddress
from fastapi_mcp_ctx.errors import McpResponseError, ResourceNotFoundError
from fastapi_mcp_ctx.testing import McpTestClient

ERAS = ["legacy", "modern"]
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


def make_app(**router_kwargs: Any) -> tuple[FastAPI, McpRouter, list[Any]]:
    seen: list[Any] = []
    router = McpRouter(**router_kwargs)

    def db() -> Iterator[str]:
        seen.append("open")
        yield "conn"
        seen.append("close")

    @router.resource("bin://sample", mime_type="application/octet-stream")
    def sample() -> bytes:
        return bytes(range(256)) * 4

    @router.resource("bin://small")
    def small() -> bytes:
        return b"\xfb\xff" * 29  # 58 bytes: the encoding holds '+' and '/' and passes 57 bytes

    @router.resource("bin://png", mime_type="image/png")
    def png() -> bytes:
        return PNG

    @router.resource("text://looks-like-base64", mime_type="text/plain")
    def b64_text() -> str:
        return "aGVsbG8="  # a str is text, never re-encoded

    @router.resource("dom://{pageId}{?selector,includeText}")
    def dom(pageId: str, selector: str = "*", includeText: bool = False) -> dict[str, Any]:  # noqa: N803
        seen.append((pageId, selector, includeText))
        return {"page": pageId, "selector": selector, "includeText": includeText}

    @router.resource("data://config{?format}", mime_type="text/plain")
    def config(format: str = "json") -> str:  # noqa: A002
        return f"format={format}"

    @router.resource("users://{user_id}/profile")
    def profile(user_id: int, conn: str = Depends(db), ctx: Context = Depends(mcp_context)) -> dict[str, Any] | None:
        seen.append(("profile", conn, ctx.uri, ctx.operation))
        return {"id": user_id} if user_id < 100 else None

    @router.resource("boom://now")
    def boom() -> str:
        raise RuntimeError("db down: password=hunter2")

    @router.resource("hdr://agent")
    def agent(request: Request, user_agent: str = Header("none")) -> str:
        return f"{user_agent} {request.url.path}"

    @router.resource("many://items")
    def items() -> list[types.TextResourceContents | types.BlobResourceContents]:
        return [
            types.TextResourceContents(uri="many://items/1", text="one"),
            types.BlobResourceContents(uri="many://items/2", blob=base64.b64encode(b"\x00").decode(), mime_type="application/x-zero"),
        ]

    app = FastAPI()
    app.include_router(router)
    return app, router, seen


async def read(client: McpTestClient, uri: str) -> dict[str, Any]:
    return (await client.request("resources/read", {"uri": uri})).result


@pytest.mark.parametrize("era", ERAS)
async def test_binary_contents_are_strict_base64_once_and_text_stays_text(era: str) -> None:
    app, _, _ = make_app()
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        for uri, expected in (("bin://sample", bytes(range(256)) * 4), ("bin://small", b"\xfb\xff" * 29), ("bin://png", PNG)):
            item = (await read(client, uri))["contents"][0]
            assert "text" not in item and item["uri"] == uri
            blob = item["blob"]
            assert "\n" not in blob and "\r" not in blob and len(blob) % 4 == 0
            assert base64.b64decode(blob, validate=True) == expected
        assert (await read(client, "bin://png"))["contents"][0]["mimeType"] == "image/png"
        text = (await read(client, "text://looks-like-base64"))["contents"][0]
        assert text == {"uri": "text://looks-like-base64", "mimeType": "text/plain", "text": "aGVsbG8="}
        many = (await read(client, "many://items"))["contents"]
        assert many == [{"uri": "many://items/1", "text": "one"}, {"uri": "many://items/2", "mimeType": "application/x-zero", "blob": "AA=="}]


@pytest.mark.parametrize("era", ERAS)
async def test_optional_query_variables_reach_the_handler_with_defaults(era: str) -> None:
    app, _, seen = make_app()
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        for uri in ("dom://p1", "dom://p1?includeText=true", "dom://p1?includeText=true&selector=body", "dom://p1?selector=body&includeText=true"):
            await read(client, uri)
        assert (await read(client, "data://config"))["contents"][0]["text"] == "format=json"
        assert (await read(client, "data://config?format=yaml"))["contents"][0]["text"] == "format=yaml"
        assert json.loads((await read(client, "dom://p1?unknown=1"))["contents"][0]["text"])["selector"] == "*"
    assert seen[:4] == [("p1", "*", False), ("p1", "*", True), ("p1", "body", True), ("p1", "body", True)]


@pytest.mark.parametrize("era", ERAS)
async def test_template_handler_gets_dependencies_context_and_typed_values(era: str) -> None:
    app, _, seen = make_app()
    async with McpTestClient(app, era=era, headers={"User-Agent": "probe/1"}) as client:  # type: ignore[arg-type]
        result = await read(client, "users://42/profile")
        agent = await read(client, "hdr://agent")
    item = result["contents"][0]
    assert item == {"uri": "users://42/profile", "mimeType": "application/json", "text": '{"id":42}'}
    assert seen == ["open", ("profile", "conn", "users://42/profile", "resources/read:users://42/profile"), "close"]
    assert agent["contents"][0]["text"] == "probe/1 /mcp"


async def test_dependency_overrides_apply_to_resources() -> None:
    app, router, seen = make_app()
    original = router.features.resources.template("users://{user_id}/profile")
    assert original is not None and original.call.dependant is not None
    db = original.call.dependant.dependencies[0].call
    assert db is not None

    def fake_db() -> str:
        return "fake"

    app.dependency_overrides[db] = fake_db
    async with McpTestClient(app, era="modern") as client:
        await read(client, "users://1/profile")
    assert seen == [("profile", "fake", "users://1/profile", "resources/read:users://1/profile")]


async def test_not_found_is_32002_in_2025_with_the_uri_as_sent() -> None:
    app, _, _ = make_app()
    async with McpTestClient(app, era="legacy") as client:
        for uri in ("file:///nonexistent.txt", "users://500/profile"):  # nothing serves it / the handler returned None
            with pytest.raises(McpResponseError) as caught:
                await read(client, uri)
            assert caught.value.code == -32002 and caught.value.http_status == 200
            assert caught.value.data["uri"] == uri and caught.value.data["reason"] == "resource_not_found"


async def test_not_found_is_400_32602_in_2026_never_32002_nor_empty_contents() -> None:
    app, _, _ = make_app()
    async with McpTestClient(app, era="modern") as client:
        for uri in ("FILE:///A/../b", "users://500/profile", "bin://sample/"):
            with pytest.raises(McpResponseError) as caught:
                await read(client, uri)
            assert caught.value.code == -32602 and caught.value.http_status == 400
            assert caught.value.data["uri"] == uri  # exactly as sent, not normalised


@pytest.mark.parametrize("era", ERAS)
async def test_malformed_uris_are_32602_in_both_eras(era: str) -> None:
    app, _, _ = make_app()
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        for uri in ("not a uri::", "users://%ZZ/profile", "users://1%2F2/profile", ""):
            with pytest.raises(McpResponseError) as caught:
                await read(client, uri)
            assert caught.value.code == -32602, uri
            assert caught.value.data["reason"] == "invalid_uri"
        with pytest.raises(McpResponseError) as typed:
            await read(client, "users://abc/profile")  # fits the template, not the int parameter
        assert typed.value.code == -32602 and typed.value.data["uri"] == "users://abc/profile"


@pytest.mark.parametrize("era", ERAS)
async def test_a_crashing_resource_is_32603_generic(era: str, caplog: pytest.LogCaptureFixture) -> None:
    app, _, _ = make_app()
    with caplog.at_level(logging.ERROR, logger="fastapi_mcp_ctx"):
        async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
            with pytest.raises(McpResponseError) as caught:
                await read(client, "boom://now")
    assert caught.value.code == -32603
    assert "hunter2" not in json.dumps([caught.value.message, caught.value.data])
    assert "Traceback" not in caught.value.message
    assert any("hunter2" in (r.exc_text or "") or "hunter2" in str(r.exc_info) for r in caplog.records)


@pytest.mark.parametrize("era", ERAS)
async def test_list_pages_and_cursors_bound_to_their_list(era: str) -> None:
    app, _, _ = make_app(settings=McpSettings(page_size=3))
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        uris: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = (await client.request("resources/list", {"cursor": cursor} if cursor else {})).result
            uris += [r["uri"] for r in page["resources"]]
            pages += 1
            if "nextCursor" not in page:
                break
            assert page["nextCursor"] != cursor
            cursor = page["nextCursor"]
        templates = (await client.request("resources/templates/list", {})).result
        for bogus in ("bogus", cursor, "dG9vbHM6Mw"):  # nonsense, a resources/list cursor, a tools/list cursor
            with pytest.raises(McpResponseError) as caught:
                await client.request("resources/templates/list", {"cursor": bogus})
            assert caught.value.code == -32602
    assert pages == 3 and len(uris) == len(set(uris)) == 7
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == ["dom://{pageId}{?selector,includeText}", "data://config{?format}", "users://{user_id}/profile"]


async def test_cache_hints_per_list_and_per_item_2026_only() -> None:
    app, router, _ = make_app(settings=McpSettings(cache_ttl_ms=7, cache_scope="private"))
    router.cache_hints("resources/templates/list", ttl_ms=1000, cache_scope="public")

    @router.resource("cache://hot", ttl_ms=0, cache_scope="private")
    @router.resource("cache://cold", ttl_ms=86_400_000, cache_scope="public")
    def cached() -> str:
        return "x"

    async with McpTestClient(app, era="modern") as client:
        templates = (await client.request("resources/templates/list", {})).result
        listed = (await client.request("resources/list", {})).result
        hot, cold = await read(client, "cache://hot"), await read(client, "cache://cold")
        plain = await read(client, "bin://png")
    assert (templates["ttlMs"], templates["cacheScope"]) == (1000, "public")
    assert (listed["ttlMs"], listed["cacheScope"]) == (7, "private")
    assert (hot["ttlMs"], hot["cacheScope"]) == (0, "private")
    assert (cold["ttlMs"], cold["cacheScope"]) == (86_400_000, "public")
    assert (plain["ttlMs"], plain["cacheScope"]) == (7, "private")
    async with McpTestClient(app, era="legacy") as client:
        for result in ((await client.request("resources/templates/list", {})).result, await read(client, "cache://cold")):
            assert "ttlMs" not in result and "cacheScope" not in result
    with pytest.raises(ValueError):
        router.cache_hints("tools/call", ttl_ms=1)
    with pytest.raises(ValueError):
        router.cache_hints("tools/list", ttl_ms=-1)


async def test_capabilities_and_methods_only_when_served() -> None:
    bare = FastAPI()
    bare.include_router(McpRouter())
    async with McpTestClient(bare, era="legacy") as client:
        caps = client.initialize_result["capabilities"]  # type: ignore[index]
        assert "resources" not in caps and "prompts" not in caps and "completions" not in caps
        for method in ("resources/list", "resources/read", "prompts/list", "completion/complete", "resources/subscribe"):
            with pytest.raises(McpResponseError) as caught:
                await client.request(method, {"uri": "x://y"})
            assert caught.value.code == -32601
    app, _, _ = make_app()
    async with McpTestClient(app, era="legacy") as client:
        caps = client.initialize_result["capabilities"]  # type: ignore[index]
        assert caps["resources"] == {"listChanged": False, "subscribe": False}  # nothing announced
        assert "prompts" not in caps and "completions" not in caps
        with pytest.raises(McpResponseError) as caught:
            await client.request("resources/subscribe", {"uri": "bin://png"})
        assert caught.value.code == -32601
    async with McpTestClient(app, era="modern") as client:
        discovered = (await client.request("server/discover", {})).result
        assert "resources" in discovered["capabilities"] and "prompts" not in discovered["capabilities"]


async def test_subscriptions_feed_the_per_session_registry() -> None:
    app, router, _ = make_app(resources_subscribe=True)
    async with McpTestClient(app, era="legacy") as first, McpTestClient(app, era="legacy") as second:
        assert first.initialize_result["capabilities"]["resources"]["subscribe"] is True  # type: ignore[index]
        assert (await first.request("resources/subscribe", {"uri": "users://1/profile"})).result == {}
        await first.request("resources/subscribe", {"uri": "users://1/profile"})  # idempotent
        await second.request("resources/subscribe", {"uri": "bin://png"})
        subscribers = await router.subscriptions.subscribers("users://1/profile")
        assert subscribers == [SessionAddress("default", first.session_id)]  # type: ignore[arg-type]
        with pytest.raises(McpResponseError) as unknown:
            await first.request("resources/subscribe", {"uri": "nothing://here"})
        assert unknown.value.code == -32002 and unknown.value.data["uri"] == "nothing://here"
        assert (await first.request("resources/unsubscribe", {"uri": "users://1/profile"})).result == {}
        assert await router.subscriptions.subscribers("users://1/profile") == []
        assert await router.subscriptions.uris(second.session_id) == ["bin://png"]  # type: ignore[arg-type]
    async with McpTestClient(app, era="modern") as modern:  # 2026: listen streams carry subscriptions
        with pytest.raises(McpResponseError) as removed:
            await modern.request("resources/subscribe", {"uri": "bin://png"})
        assert removed.value.code == -32601 and removed.value.http_status == 404


def test_registration_errors_say_what_is_wrong() -> None:
    router = McpRouter()
    with pytest.raises(ValueError, match="scheme"):
        router.resource("no-scheme")(lambda: "x")
    with pytest.raises(ValueError, match="no parameter"):
        router.resource("a://{missing}")(lambda: "x")
    with pytest.raises(ValueError, match="need a default"):

        @router.resource("a://{x}")
        def needs(x: str, y: str) -> str:
            return x + y

    router.resource("a://dup")(lambda: "x")
    with pytest.raises(ValueError, match="already registered"):
        router.resource("a://dup")(lambda: "y")
    with pytest.raises(ValueError, match="not template variables"):
        router.resource("a://{x}/c", complete={"y": lambda value: []})(lambda x: x)


def test_not_found_error_codes_by_era() -> None:
    assert ResourceNotFoundError("a://b", era="legacy").code == -32002
    modern = ResourceNotFoundError("a://b")
    assert modern.code == -32602 and modern.to_error(3)["data"] == {"requestId": 3, "reason": "resource_not_found", "uri": "a://b"}


async def test_updates_reach_only_sessions_that_subscribed_with_resources_subscribe() -> None:
    """B44 end to end: ``resources/subscribe`` (not a tool) feeds the registry the notifier
    reads; the update arrives on the subscriber's GET stream only, and stops after unsubscribe."""
    app, router = build(authenticate=tenant_auth)
    router.resource("note://{owner}/secret")(lambda owner: f"{owner}'s secret")
    async with open_client(app, headers={"x-tenant": "a"}) as ca, open_client(app, headers={"x-tenant": "a"}) as cb:
        a, b = Wire(ca), Wire(cb)
        sid_a, sid_b = await a.initialize(), await b.initialize()
        async with get_stream(app, sid_a, **{"x-tenant": "a"}) as stream_a, get_stream(app, sid_b, **{"x-tenant": "a"}) as stream_b:
            await a.legacy("resources/subscribe", {"uri": "note://a/secret"})
            await router.notify_resource_updated("note://a/secret", tenant_id="a")
            await wait_frames(stream_a, 1)
            await a.legacy("resources/unsubscribe", {"uri": "note://a/secret"})
            await router.notify_resource_updated("note://a/secret", tenant_id="a")
            await router.notify_tools_list_changed()  # marker: every stream got everything before it
            await wait_frames(stream_a, 2)
            await wait_frames(stream_b, 1)
    assert frames(stream_a)[0] == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "note://a/secret"}}
    assert methods(stream_a) == ["notifications/resources/updated", "notifications/tools/list_changed"]
    assert methods(stream_b) == ["notifications/tools/list_changed"]


async def test_non_ascii_uri_travels_in_the_base64_mcp_name_and_decodes_once() -> None:
    """B28 for resources: a non-ASCII URI goes in ``Mcp-Name`` as ``=?base64?...?=`` (2026) and is
    compared decoded; the template value is decoded from the URI exactly once."""
    app, _, seen = make_app()
    async with McpTestClient(app, era="modern") as client:
        raw = await read(client, "dom://Grüße?selector=%C3%A9%2520")
    assert json.loads(raw["contents"][0]["text"]) == {"page": "Grüße", "selector": "é%20", "includeText": False}
    assert seen == [("Grüße", "é%20", False)]


@pytest.mark.parametrize("era", ERAS)
async def test_router_dependencies_and_security_guard_resources_prompts_completers(era: str) -> None:
    calls: list[str] = []

    def audit(request: Request) -> None:
        calls.append(request.url.path)

    def staff(key: str | None = Security(APIKeyHeader(name="X-Key", auto_error=False))) -> str:
        if key is None:
            raise HTTPException(401, "no key")
        if key != "ok":
            raise HTTPException(403, "wrong key")
        return key

    router = McpRouter(dependencies=[Depends(audit)])
    router.resource("staff://notes")(lambda key=Depends(staff): f"notes for {key}")
    router.prompt("staff_prompt", complete={"topic": lambda value: ["a", "b"]})(lambda topic: topic)
    app = FastAPI()
    app.include_router(router)
    async with McpTestClient(app, era=era, headers={"X-Key": "ok"}) as client:  # type: ignore[arg-type]
        assert (await read(client, "staff://notes"))["contents"][0]["text"] == "notes for ok"
        await client.request("prompts/get", {"name": "staff_prompt", "arguments": {"topic": "x"}})
        await client.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "staff_prompt"}, "argument": {"name": "topic", "value": ""}})
    assert calls == ["/mcp"] * 3
    for headers, status in (({}, 401), ({"X-Key": "bad"}, 403)):
        async with McpTestClient(app, era=era, headers=headers) as client:  # type: ignore[arg-type]
            with pytest.raises(McpResponseError) as caught:
                await read(client, "staff://notes")
        assert caught.value.http_status == status


@pytest.mark.parametrize("era", ERAS)
async def test_a_returned_input_required_result_is_a_server_error_never_content(era: str) -> None:
    """B46, the part that is this module's: a resource or prompt function that returns an
    ``InputRequiredResult`` itself gets -32603 (logged), never its JSON as text or a message."""
    interim = types.InputRequiredResult(request_state="s")
    router = McpRouter()
    router.resource("vault://static")(lambda: interim)
    router.prompt("deploy_prompt")(lambda: interim)
    app = FastAPI()
    app.include_router(router)
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        for method, params in (("resources/read", {"uri": "vault://static"}), ("prompts/get", {"name": "deploy_prompt"})):
            with pytest.raises(McpResponseError) as caught:
                await client.request(method, params)
            assert caught.value.code == -32603 and "input_required" not in caught.value.message


async def test_a_subscription_to_an_escaped_form_hears_the_update_of_the_plain_uri() -> None:
    """RFC 3986 §6.2.2: ``note://%61/secret`` (an escaped unreserved character) and
    ``note://a/secret`` are one URI, so its subscriber hears the update (was silently lost)."""
    app, router = build(authenticate=tenant_auth)
    router.resource("note://{owner}/secret")(lambda owner: f"{owner}'s secret")
    async with open_client(app, headers={"x-tenant": "a"}) as client:
        wire = Wire(client)
        sid = await wire.initialize()
        async with get_stream(app, sid, **{"x-tenant": "a"}) as stream:
            assert result_of(await wire.legacy("resources/subscribe", {"uri": "note://%61/secret"})) == {}
            await router.notify_resource_updated("note://a/secret", tenant_id="a")
            await wait_frames(stream, 1)
            await wire.legacy("resources/unsubscribe", {"uri": "note://a/secret"})
            assert await router.subscriptions.subscribers("note://a/secret") == []
    assert frames(stream)[0]["params"] == {"uri": "note://a/secret"}


@pytest.mark.parametrize("era", ERAS)
async def test_an_http_404_from_a_resource_dependency_is_not_found(era: str) -> None:
    """``HTTPException(404)`` raised by a resource's dependency (the FastAPI way of saying an item
    does not exist) answers the era's not-found error with ``data.uri``; another 4xx stays a
    rejected request."""
    router = McpRouter(settings=McpSettings())

    def load_item(ctx: Context = Depends(mcp_context)) -> str:
        item_id = (ctx.uri or "").removeprefix("items://")
        if item_id == "403":
            raise HTTPException(409, "locked")
        raise HTTPException(404, f"no item {item_id}")

    @router.resource("items://{item_id}")
    async def item(item_id: int, found: str = Depends(load_item)) -> str:
        return found

    app = FastAPI()
    app.include_router(router)
    async with McpTestClient(app, era=era) as client:
        with pytest.raises(McpResponseError) as caught:
            await read(client, "items://7")
        assert caught.value.code == (-32002 if era == "legacy" else -32602)
        assert caught.value.data["uri"] == "items://7" and caught.value.data["reason"] == "resource_not_found"
        assert "no item 7" in caught.value.message
        with pytest.raises(McpResponseError) as caught:
            await read(client, "items://403")
        assert caught.value.code == -32600 and caught.value.data["status"] == 409
