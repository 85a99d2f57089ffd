"""What the lean MCP route keeps of FastAPI (DESIGN.md decision 12, ``_server/claim.py``).

Without a dependency to run, the app's router hands the MCP path straight to the endpoint
(:class:`~fastapi_mcp_ctx._server.claim.RouterClaim`); with include-, router- or app-level
dependencies FastAPI's own request handling runs them first, on the real ``Request``, for POST,
GET and DELETE in both eras. Either way the app's middleware, exception handlers, lifespan,
``dependency_overrides``, mounting and the route's absence from OpenAPI are as for any route.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from conftest import Wire, make_router, open_client, result_of
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.types import Receive, Scope, Send

from fastapi_mcp_ctx import McpRouter, Principal
from fastapi_mcp_ctx._server.claim import RouterClaim

SEEN: list[tuple[str, str, str]] = []


async def guard(request: Request) -> None:
    """An include-level guard: sees the real request (method, path, its own header)."""
    SEEN.append((request.method, request.url.path, request.headers.get("x-key", "-")))
    if request.headers.get("x-key") != "open-sesame":
        raise HTTPException(403, "no key")


async def allow_all(request: Request) -> None:
    SEEN.append((request.method, request.url.path, "override"))


def _router(**kwargs: Any) -> McpRouter:
    router = McpRouter(settings=make_router().settings, **kwargs) if kwargs else make_router()

    @router.tool()
    async def ping_tool() -> str:
        """Answers pong."""
        return "pong"

    return router


def _guarded_app(where: str) -> FastAPI:
    app = FastAPI()
    if where == "include_router":
        app.include_router(_router(), dependencies=[Depends(guard)])
    elif where == "app":
        app = FastAPI(dependencies=[Depends(guard)])
        app.include_router(_router())
    else:  # an APIRouter including the McpRouter, included by the app
        outer = APIRouter(dependencies=[Depends(guard)])
        outer.include_router(_router())
        app.include_router(outer)
    return app


KEY = {"x-key": "open-sesame"}


@pytest.mark.parametrize("where", ["include_router", "app", "nested APIRouter"])
async def test_dependencies_above_the_route_guard_every_method_in_both_eras(where: str) -> None:
    SEEN.clear()
    app = _guarded_app(where)
    async with open_client(app) as client:
        wire = Wire(client)
        assert (await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}, check=False)).status_code == 403
        assert (await wire.legacy("tools/list", session=None, check=False)).status_code == 403
        assert (await client.get("/mcp", headers={"accept": "text/event-stream"})).status_code == 403
        assert (await client.delete("/mcp", headers={"mcp-session-id": "x"})).status_code == 403
        called = result_of(await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}, headers=KEY))
        assert called["structuredContent"] == {"result": "pong"}
        session = await wire.initialize(headers=KEY)
        legacy = result_of(await wire.legacy("tools/call", {"name": "ping_tool", "arguments": {}}, headers=KEY))
        assert legacy["structuredContent"] == {"result": "pong"}
        no_session = await client.get("/mcp", headers={"accept": "text/event-stream", **KEY})
        assert no_session.status_code == 400  # past the guard: the endpoint's own answer (no session named)
        deleted = await client.delete("/mcp", headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25", **KEY})
        assert deleted.status_code in (200, 204)
    assert ("GET", "/mcp", "-") in SEEN and ("DELETE", "/mcp", "-") in SEEN and ("POST", "/mcp", "-") in SEEN
    assert ("DELETE", "/mcp", "open-sesame") in SEEN
    assert not isinstance(app.router.middleware_stack, RouterClaim)  # FastAPI's handling runs the guard


@pytest.mark.parametrize("where", ["include_router", "app"])
async def test_an_override_of_an_include_level_dependency_replaces_it(where: str) -> None:
    SEEN.clear()
    app = _guarded_app(where)
    app.dependency_overrides[guard] = allow_all
    async with open_client(app) as client:
        wire = Wire(client)
        called = result_of(await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}))
        assert called["structuredContent"] == {"result": "pong"}
        assert (await client.delete("/mcp", headers={"mcp-session-id": "unknown"})).status_code == 404
    assert SEEN == [("POST", "/mcp", "override"), ("DELETE", "/mcp", "override")]


async def test_mcp_router_dependencies_guard_each_call_not_the_http_request_and_can_be_overridden() -> None:
    SEEN.clear()
    app = FastAPI()
    app.include_router(_router(dependencies=[Depends(guard)]))
    async with open_client(app) as client:
        wire = Wire(client)
        assert result_of(await wire.modern("tools/list"))["tools"][0]["name"] == "ping_tool"  # not a call: not guarded
        denied = await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}, check=False)
        assert denied.status_code == 403 and "error" in denied.json()
        called = result_of(await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}, headers=KEY))
        assert called["structuredContent"] == {"result": "pong"}
        app.dependency_overrides[guard] = allow_all
        called = result_of(await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}))
        assert called["structuredContent"] == {"result": "pong"}
    assert SEEN == [("POST", "/mcp", "-"), ("POST", "/mcp", "open-sesame"), ("POST", "/mcp", "override")]
    assert isinstance(app.router.middleware_stack, RouterClaim)  # no HTTP-level dependency: the lean path


def _lean_app() -> FastAPI:
    app = FastAPI()
    app.include_router(_router())
    return app


async def test_without_dependencies_the_router_claims_the_path_and_middleware_sees_it() -> None:
    app = _lean_app()
    seen: list[tuple[str, int]] = []

    @app.middleware("http")
    async def record(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        seen.append((request.url.path, response.status_code))
        response.headers["x-seen-by"] = "middleware"
        return response

    async with open_client(app) as client:
        wire = Wire(client)
        for _ in range(2):  # the first request installs the claim (no lifespan ran), the second uses it
            response = await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}})
            assert result_of(response)["structuredContent"] == {"result": "pong"}
            assert response.headers["x-seen-by"] == "middleware"
        refused = await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}, headers={"mcp-method": "tools/list"}, check=False)
        assert refused.status_code == 400 and refused.headers["x-seen-by"] == "middleware"
    assert seen == [("/mcp", 200), ("/mcp", 200), ("/mcp", 400)]
    assert isinstance(app.router.middleware_stack, RouterClaim)


async def test_a_pure_asgi_middleware_sees_the_request_and_the_response_messages() -> None:
    app = _lean_app()
    messages: list[str] = []

    class Recorder:
        def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
            self.inner = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                messages.append(f"{scope['method']} {scope['path']}")

            async def sending(message: dict[str, Any]) -> None:
                messages.append(message["type"])
                await send(message)

            await self.inner(scope, receive, sending)

    app.add_middleware(Recorder)  # type: ignore[arg-type]
    async with open_client(app) as client:
        for _ in range(2):
            assert (await Wire(client).modern("tools/list")).status_code == 200
    assert messages == ["POST /mcp", "http.response.start", "http.response.body"] * 2


class Banned(Exception):
    pass


async def test_an_app_exception_handler_answers_what_escapes_the_endpoint() -> None:
    async def authenticate(request: Request) -> Principal | None:
        if request.headers.get("x-banned"):
            raise Banned()
        return Principal(subject="alice")

    router = McpRouter(settings=make_router(session_mode="stateless").settings, authenticate=authenticate)

    @router.tool()
    async def ping_tool() -> str:
        """Answers pong."""
        return "pong"

    app = FastAPI()
    app.include_router(router)

    @app.exception_handler(Banned)
    async def banned(request: Request, exc: Banned) -> JSONResponse:
        return JSONResponse({"banned": request.url.path}, status_code=418)

    async with open_client(app) as client:
        wire = Wire(client)
        for _ in range(2):  # before the claim (first request) and through it
            assert result_of(await wire.modern("tools/list"))["tools"][0]["name"] == "ping_tool"
            refused = await wire.modern("tools/list", headers={"x-banned": "1"}, check=False)
            assert (refused.status_code, refused.json()) == (418, {"banned": "/mcp"})
    assert isinstance(app.router.middleware_stack, RouterClaim)


async def test_mounted_under_a_sub_application_the_endpoint_answers_at_the_mount_path() -> None:
    sub = FastAPI()
    sub.include_router(_router())
    app = FastAPI()
    app.mount("/sub", sub)
    async with open_client(app) as client:
        wire = Wire(client, path="/sub/mcp")
        for _ in range(2):
            called = result_of(await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}))
            assert called["structuredContent"] == {"result": "pong"}
        assert (await client.post("/mcp", json={})).status_code == 404  # not at the outer app's root
    assert isinstance(sub.router.middleware_stack, RouterClaim)


async def test_the_lifespan_runs_and_installs_the_claim_before_the_first_request() -> None:
    started: list[str] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        started.append("app")
        yield

    app = FastAPI(lifespan=lifespan)
    app.include_router(_router())
    async with app.router.lifespan_context(app):
        assert isinstance(app.router.middleware_stack, RouterClaim)  # McpRouter's lifespan, merged by include_router
        async with open_client(app) as client:
            assert (await Wire(client).modern("tools/list")).status_code == 200
    assert started == ["app"]


async def test_a_route_before_that_matches_the_path_keeps_it_and_other_methods_go_to_later_routes() -> None:
    app = FastAPI()

    @app.get("/{anything}")
    async def catch_all(anything: str) -> PlainTextResponse:  # pyright: ignore[reportUnusedFunction]
        return PlainTextResponse(f"catch-all {anything}")

    app.include_router(_router())

    @app.put("/mcp")
    async def put_mcp() -> PlainTextResponse:  # pyright: ignore[reportUnusedFunction]
        return PlainTextResponse("put")

    async with open_client(app) as client:
        for _ in range(2):
            assert (await client.get("/mcp")).text == "catch-all mcp"  # registered first: still first
            assert (await client.put("/mcp")).text == "put"  # a method the MCP route does not serve
            assert (await Wire(client).modern("tools/list")).status_code == 200  # POST: no earlier route has it
    stack = app.router.middleware_stack
    assert not isinstance(stack, RouterClaim)  # the catch-all could take /mcp: nothing is claimed


async def test_the_route_is_absent_from_openapi_and_the_lean_path_claimed_only_for_its_methods() -> None:
    app = FastAPI()
    app.include_router(_router(), prefix="/v1", tags=["mcp"])

    @app.get("/health")
    async def health() -> dict[str, str]:  # pyright: ignore[reportUnusedFunction]
        return {"ok": "yes"}

    assert "/v1/mcp" not in app.openapi()["paths"] and "/health" in app.openapi()["paths"]
    async with open_client(app) as client:
        wire = Wire(client, path="/v1/mcp")
        for _ in range(2):
            assert result_of(await wire.modern("tools/list"))["tools"][0]["name"] == "ping_tool"
            assert (await client.put("/v1/mcp")).status_code == 405
            assert (await client.get("/health")).json() == {"ok": "yes"}
    assert isinstance(app.router.middleware_stack, RouterClaim)
    assert "/v1/mcp" not in app.openapi()["paths"]


async def test_a_route_added_after_the_claim_is_served() -> None:
    app = _lean_app()
    async with open_client(app) as client:
        assert (await Wire(client).modern("tools/list")).status_code == 200
        other = FastAPI()  # a router included after start-up, registered before nothing: found at its path

        @other.get("/late")
        async def late() -> dict[str, str]:  # pyright: ignore[reportUnusedFunction]
            return {"late": "yes"}

        app.include_router(other.router)
        assert (await client.get("/late")).json() == {"late": "yes"}
        assert (await Wire(client).modern("tools/list")).status_code == 200


@pytest.mark.parametrize("change", ["replace-and-move", "assign-a-new-list"])
async def test_a_route_list_changed_in_place_after_the_claim_gives_the_path_to_the_earlier_route(change: str) -> None:
    """The claim must notice a change that keeps the list's length (it compared only the length)."""
    app = _lean_app()

    async def blocker() -> None:
        raise HTTPException(403, "blocked")

    app.add_api_route("/other", blocker, methods=["POST"])
    async with open_client(app) as client:
        wire = Wire(client)
        for _ in range(2):  # the first request installs the claim, the second goes through it
            assert result_of(await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}))["structuredContent"] == {
                "result": "pong"
            }
        shadow = app.router.routes[-1].__class__("/mcp", blocker, methods=["POST"])
        if change == "replace-and-move":
            app.router.routes[-1] = shadow
            app.router.routes.insert(0, app.router.routes.pop())  # same length, same list object
        else:
            app.router.routes = [shadow, *app.router.routes[:-1]]
        refused = await wire.modern("tools/call", {"name": "ping_tool", "arguments": {}}, check=False)
        assert refused.status_code == 403 and refused.json() == {"detail": "blocked"}
