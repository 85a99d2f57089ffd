"""What the tool's dependency solve skips must equal what FastAPI would have built.

The bridge hands FastAPI's solver a ``Response`` made without ``Response.__init__`` (one shared
unsent one when no dependency takes a ``Response`` and no override applies), the empty query
string's ``QueryParams`` parsed once, no cookies when the request sends none, the lean route's
own scope, and leaves an empty function-scoped exit stack unexited (``_fastapi_compat``,
``_server/call_prep``). These tests hold each shortcut to the object or the behaviour it
replaces, on every FastAPI admitted.
"""

from __future__ import annotations

import inspect
from contextlib import AsyncExitStack
from typing import Any

import pytest
from fastapi import Cookie, Depends, FastAPI, Query, Request
from fastapi.dependencies.utils import get_dependant
from fastapi.testclient import TestClient
from starlette.responses import Response

from fastapi_mcp_ctx import McpRouter, McpSettings, ToolError
from fastapi_mcp_ctx._fastapi_compat import UNSENT_RESPONSE, blank_response, takes_response

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25", "Content-Type": "application/json"}


def test_the_blank_response_is_what_response_makes() -> None:
    made, blank = Response(), blank_response()
    assert vars(blank) == vars(made)
    assert blank.headers == made.headers and blank is not blank_response()  # one per call


def test_an_exit_stack_exposes_what_it_entered() -> None:
    """``close_solve`` reads contextlib's own record of what a stack entered."""
    stack = AsyncExitStack()
    assert len(stack._exit_callbacks) == 0  # pyright: ignore[reportPrivateUsage]
    stack.callback(lambda: None)
    assert len(stack._exit_callbacks) == 1  # pyright: ignore[reportPrivateUsage]


def app_with(*tools: Any) -> TestClient:
    router = McpRouter(settings=McpSettings(server_name="x", server_version="1", auth_mode="none", session_mode="stateless"))
    for tool in tools:
        router.add_tool(tool)
    app = FastAPI()
    app.include_router(router)
    return TestClient(app, base_url="http://localhost")


def call(client: TestClient, name: str, url: str = "/mcp", **headers: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {}}}
    response = client.post(url, headers={**HEADERS, **headers}, json=body)
    assert response.status_code == 200
    return response.json()["result"]


async def cookie_and_query(session: str | None = Cookie(default=None), q: str | None = Query(default=None)) -> dict[str, str]:
    """Read a cookie and a query parameter."""
    return {"session": str(session), "q": str(q)}


async def request_view(request: Request, v: str = Depends(lambda: "v")) -> dict[str, str]:
    """The call's Request, as a dependency-taking tool sees it."""
    return {"cookies": repr(request.cookies), "query": str(request.query_params)}


@pytest.mark.parametrize(
    ("url", "headers", "expected"),
    [
        ("/mcp", {}, {"session": "None", "q": "None"}),
        ("/mcp", {"Cookie": "session=abc; z=1"}, {"session": "abc", "q": "None"}),
        ("/mcp?q=zz", {}, {"session": "None", "q": "zz"}),
    ],
)
def test_cookie_and_query_parameters_of_a_tool(url: str, headers: dict[str, str], expected: dict[str, str]) -> None:
    assert call(app_with(cookie_and_query), "cookie_and_query", url, **headers)["structuredContent"] == expected


@pytest.mark.parametrize(
    ("url", "headers", "expected"),
    [
        ("/mcp", {}, {"cookies": "{}", "query": ""}),
        ("/mcp", {"Cookie": "session=abc; z=1"}, {"cookies": "{'session': 'abc', 'z': '1'}", "query": ""}),
        ("/mcp?q=zz", {}, {"cookies": "{}", "query": "q=zz"}),
    ],
)
def test_the_requests_cookies_and_query_params(url: str, headers: dict[str, str], expected: dict[str, str]) -> None:
    assert call(app_with(request_view), "request_view", url, **headers)["structuredContent"] == expected


def test_a_cookie_dict_is_the_calls_own() -> None:
    """The empty cookies of one call are not shared with the next (a tool may write into them)."""

    async def scribble(request: Request, v: str = Depends(lambda: "v")) -> str:
        """Write into the request's cookies."""
        seen = repr(request.cookies)
        request.cookies["x"] = "1"
        return seen

    client = app_with(scribble)
    assert call(client, "scribble")["structuredContent"] == {"result": "{}"}
    assert call(client, "scribble")["structuredContent"] == {"result": "{}"}


FUNCTION_SCOPE = "scope" in inspect.signature(Depends).parameters  # FastAPI >= 0.121


@pytest.mark.skipif(not FUNCTION_SCOPE, reason="Depends(scope=...) arrived in FastAPI 0.121")
@pytest.mark.parametrize("fails", [False, True])
def test_request_and_function_scoped_yield_dependencies(fails: bool) -> None:
    """Teardown order and the exception thrown in after ``yield``: the function-scoped stack first."""
    events: list[str] = []

    def dependency(label: str) -> Any:
        async def dep() -> Any:
            events.append(f"{label}:setup")
            try:
                yield label
            except Exception as exc:
                events.append(f"{label}:exc:{type(exc).__name__}")
                raise
            finally:
                events.append(f"{label}:teardown")

        return dep

    async def both(a: str = Depends(dependency("req")), b: str = Depends(dependency("fn"), scope="function")) -> str:  # type: ignore[call-arg]
        """Take both kinds."""
        events.append("handler")
        if fails:
            raise ToolError("nope")
        return a + b

    result = call(app_with(both), "both")
    assert result["isError"] is fails
    thrown = ["fn:exc:ToolError", "fn:teardown", "req:exc:ToolError", "req:teardown"]
    assert events == ["req:setup", "fn:setup", "handler", *(thrown if fails else ["fn:teardown", "req:teardown"])]


def test_a_swallowed_handler_exception_is_refused() -> None:
    """A yield dependency that catches the handler's exception without raising it again: the call
    fails (FastAPI's rule), its teardown ran once (``open_solve``/``close_solve`` in ``call_handler``)."""
    events: list[str] = []

    async def swallow() -> Any:
        try:
            yield "x"
        except ToolError:
            events.append("swallowed")
        finally:
            events.append("teardown")

    async def failing(x: str = Depends(swallow)) -> str:
        """Fail."""
        raise ToolError("nope")

    result = call(app_with(failing), "failing")
    assert result["isError"] is True and events == ["swallowed", "teardown"]


def test_which_graphs_take_a_response() -> None:
    """``takes_response`` looks through the whole graph: a nested ``Response`` parameter counts."""

    def plain(v: str = Depends(lambda: "v")) -> str:
        return v

    def inner(response: Response) -> str:
        return "r"

    def outer(r: str = Depends(inner)) -> str:
        return r

    assert not takes_response(None)
    assert not takes_response(get_dependant(path="/", call=plain))
    assert takes_response(get_dependant(path="/", call=inner))
    assert takes_response(get_dependant(path="/", call=outer))


def test_a_tool_without_a_response_dependency_shares_the_unsent_response() -> None:
    """Only a graph where no dependency takes ``Response`` is marked for the shared response."""
    router = McpRouter(settings=McpSettings(server_name="x", server_version="1", auth_mode="none", session_mode="stateless"))
    router.add_tool(request_view)
    router.add_tool(headers_set)
    tools = {name: router.registry.get(name) for name in ("request_view", "headers_set")}
    assert tools["request_view"] is not None and tools["request_view"].response_free
    assert tools["headers_set"] is not None and not tools["headers_set"].response_free


def mark_response(response: Response) -> str:
    """Report the headers the solver's response arrived with, then set one."""
    seen = repr(response.headers.raw)
    response.headers["x-mark"] = "1"
    response.status_code = 201
    return seen


def seen_headers(seen: str = Depends(mark_response)) -> str:
    return seen


async def headers_set(seen: str = Depends(seen_headers)) -> str:
    """Return what a nested dependency's Response held before it set a header."""
    return seen


FRESH = repr([(b"content-length", b"0")])


def test_a_response_dependency_gets_a_fresh_response_per_call() -> None:
    """Headers a dependency sets through ``Response`` never reach the next call, nor the shared one."""
    client = app_with(headers_set)
    for _ in range(2):
        assert call(client, "headers_set")["structuredContent"] == {"result": FRESH}
    assert vars(UNSENT_RESPONSE) == vars(blank_response())


def test_an_override_taking_a_response_gets_a_fresh_one_per_call() -> None:
    """A graph without ``Response`` whose override takes one: no shared response while overrides apply."""

    async def plain_dependency() -> str:
        return "plain"

    async def overridden(v: str = Depends(plain_dependency)) -> str:
        """Return the dependency's value."""
        return v

    client = app_with(overridden)
    assert call(client, "overridden")["structuredContent"] == {"result": "plain"}
    app: Any = client.app
    app.dependency_overrides[plain_dependency] = mark_response
    for _ in range(2):
        assert call(client, "overridden")["structuredContent"] == {"result": FRESH}
    assert vars(UNSENT_RESPONSE) == vars(blank_response())


@pytest.mark.parametrize("route", ["lean", "include_level_dependency"])
def test_the_tools_solve_and_a_route_level_solve_keep_their_own_exit_stacks(route: str) -> None:
    """A lean route's call solves in the HTTP request's own scope; below a route-level yield
    dependency (FastAPI's request handling) the call's scope is a copy: neither solve finds the
    other's exit stack in its scope at teardown."""
    events: list[str] = []

    def stack_of(request: Request) -> Any:  # FastAPI >= 0.121's key, else the pre-0.121 one (None: FastAPI keeps its stack out of the scope)
        return request.scope.get("fastapi_inner_astack", request.scope.get("fastapi_astack"))

    def own_stack(label: str) -> Any:
        async def dependency(request: Request) -> Any:
            stack = stack_of(request)
            yield label
            events.append(f"{label}:{'own' if stack_of(request) is stack else 'other'}")

        return dependency

    async def held(v: str = Depends(own_stack("tool"))) -> str:
        """Return the dependency's value."""
        return v

    router = McpRouter(settings=McpSettings(server_name="x", server_version="1", auth_mode="none", session_mode="stateless"))
    router.add_tool(held)
    app = FastAPI()
    if route == "lean":
        app.include_router(router)
    else:
        app.include_router(router, dependencies=[Depends(own_stack("route"))])
    client = TestClient(app, base_url="http://localhost")
    for _ in range(2):
        assert call(client, "held")["structuredContent"] == {"result": "tool"}
    assert events == ["tool:own"] * 2 if route == "lean" else ["tool:own", "route:own"] * 2
