"""Faults a new user's first trial hit: each refusal or error names what to change."""

from __future__ import annotations

import logging
from typing import Annotated, Optional

import httpx
import pytest
from click.testing import CliRunner
from conftest import make_router, mcp_settings, open_client, rpc
from fastapi import Depends, FastAPI, Header, Path
from mcp.server.mcpserver.context import Context as SdkContext
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, McpRouter, Principal
from fastapi_mcp_ctx._probe import probe
from fastapi_mcp_ctx._stdio.headers import stdio_headers
from fastapi_mcp_ctx._stdio.serve import _choose  # pyright: ignore[reportPrivateUsage]
from fastapi_mcp_ctx._stdio.serve import resolve_app as _resolve_app
from fastapi_mcp_ctx.cli import (
    _headers,  # pyright: ignore[reportPrivateUsage]
    cli,
)
from fastapi_mcp_ctx.errors import AppLoadError, ConfigurationError, McpResponseError
from fastapi_mcp_ctx.testing import Era, McpTestClient

# -- 1. app.mount("/mcp", mcp_router) -------------------------------------------------------


def _mounted_app() -> FastAPI:
    router = make_router()

    @router.tool
    async def add(a: int) -> int:
        """Return ``a``."""
        return a

    app = FastAPI()
    app.mount("/mcp", router)
    return app


async def test_a_mounted_router_answers_every_request_with_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    """A client posting to the mount (at /mcp or /mcp/mcp) gets HTTP 500 naming include_router, and
    one ERROR line is logged per request."""
    app = _mounted_app()
    async with open_client(app) as client:
        for path in ("/mcp/", "/mcp/mcp"):
            caplog.clear()
            with caplog.at_level(logging.ERROR, logger="fastapi_mcp_ctx"):
                response = await client.post(path, json=rpc("tools/list"), headers={"Accept": "application/json, text/event-stream"})
            assert response.status_code == 500, path
            message = response.json()["error"]["message"]
            assert "app.include_router(mcp_router)" in message and "app.mount(" in message
            errors = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert len(errors) == 1 and "app.include_router(mcp_router)" in errors[0].getMessage()


def test_the_test_client_and_stdio_refuse_a_mounted_router() -> None:
    """McpTestClient and the stdio/serve discovery no longer find a router reached only through a Mount."""
    app = _mounted_app()
    with pytest.raises(ConfigurationError, match=r"app\.include_router\(mcp_router\) instead of app\.mount"):
        McpTestClient(app)
    with pytest.raises(AppLoadError, match=r"app\.include_router\(mcp_router\) instead of app\.mount"):
        _choose(app, "m:app", None)
    included = make_router()
    fine = FastAPI()
    fine.include_router(included)
    fine.mount("/again", included)  # also included: the included endpoint serves
    assert McpTestClient(fine).path == "/mcp"


# -- 2, 8. a context that would silently become a required argument -------------------------


def _register(source: str) -> None:
    namespace: dict[str, object] = {"SdkContext": SdkContext, "Context": Context, "Depends": Depends, "BaseModel": BaseModel}
    exec(source, namespace)  # the handler as a user writes it, in a module's globals
    make_router().tool(namespace["t"])  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("async def t(x: int, ctx: SdkContext) -> int:\n    return x", r"tool 't': parameter 'ctx' is annotated with mcp\.server\.mcpserver\.context\.Context, not fastapi_mcp_ctx's"),
        ("async def t(x: int, ctx: SdkContext | None = None) -> int:\n    return x", r"parameter 'ctx' is annotated with mcp\..*Context"),
        ("async def t(x: int, ctx) -> int:\n    return x", r"tool 't': parameter 'ctx' has no annotation"),
        ("def dep(context) -> int:\n    return 1\nasync def t(x: int = Depends(dep)) -> int:\n    return x", r"dependency 'dep' of tool 't': parameter 'context' has no annotation"),
        ("def dep(ctx: SdkContext) -> int:\n    return 1\nasync def t(x: int = Depends(dep)) -> int:\n    return x", r"dependency 'dep' of tool 't': parameter 'ctx' is annotated"),
    ],
)
def test_a_foreign_or_unannotated_context_is_refused_naming_the_fix(source: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected) as caught:
        _register(source)
    assert "`ctx: McpContext`" in str(caught.value) or "`context: McpContext`" in str(caught.value)
    assert "Depends(mcp_context)" in str(caught.value) and "from fastapi_mcp_ctx import" in str(caught.value)


@pytest.mark.parametrize("annotation", ["Context | None = None", "Optional[Context] = None"])
def test_an_optional_context_suggests_mcp_context(annotation: str) -> None:
    namespace: dict[str, object] = {"Context": Context, "Optional": Optional}
    exec(f"async def t(x: int, ctx: {annotation}) -> int:\n    return x", namespace)
    with pytest.raises(ValueError, match=r"tool 't': parameter 'ctx' is an optional Context.*Declare it `ctx: McpContext` \(from fastapi_mcp_ctx import McpContext\)"):
        make_router().tool(namespace["t"])  # pyright: ignore[reportArgumentType]


def test_context_lookalikes_that_are_fine_stay_accepted() -> None:
    """Our Context, a named argument ``context: str``, and an application's own model named Context."""
    _register("async def t(x: int, ctx: Context) -> int:\n    return x")
    _register("async def t(x: int, context: str) -> int:\n    return x")
    _register("class Context(BaseModel):\n    topic: str\nasync def t(context: Context) -> str:\n    return context.topic")


# -- 3. authenticate= failing on a missing Header() -----------------------------------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_missing_authenticate_header_is_named_in_the_401(era: Era) -> None:
    def authenticate(x_api_key: Annotated[str, Header()]) -> Principal:
        return Principal(subject=x_api_key)

    router = McpRouter(settings=mcp_settings(), authenticate=authenticate)
    app = FastAPI()
    app.include_router(router)
    with pytest.raises(McpResponseError) as caught:
        async with McpTestClient(app, era=era) as client:
            await client.list_tools()
    assert caught.value.http_status == 401 and caught.value.code == -32001
    assert "header.x-api-key: Field required" in caught.value.message
    async with McpTestClient(app, era=era, headers={"X-API-Key": "k1"}) as client:
        assert await client.list_tools() == []


# -- 4. check at a redirecting URL, check at an app without its router ----------------------


async def test_check_at_a_trailing_slash_names_the_url_it_redirects_to() -> None:
    app = FastAPI()
    app.include_router(make_router())
    report = await probe("http://127.0.0.1/mcp/", transport=httpx.ASGITransport(app=app))
    assert report.fatal is not None and "HTTP 307" in report.fatal
    assert "fastapi-mcp-ctx check http://127.0.0.1/mcp" in report.fatal and "no JSON-RPC response" not in report.fatal
    assert (await probe("http://127.0.0.1/mcp", transport=httpx.ASGITransport(app=app))).ok


async def test_check_at_an_app_without_its_router_says_to_include_it() -> None:
    app = FastAPI()  # the router was built, its include_router forgotten

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"ok": "yes"}

    report = await probe("http://127.0.0.1/mcp", transport=httpx.ASGITransport(app=app))
    assert report.fatal is not None and "HTTP 404" in report.fatal and "app.include_router(mcp_router)" in report.fatal


# -- 5. one header parser for check -H and stdio --header -----------------------------------


@pytest.mark.parametrize("option", ["X-API-Key=key-acme", "X-API-Key: key-acme", "x-api-key:key-acme"])
def test_check_and_stdio_take_both_header_forms(option: str) -> None:
    assert _headers([option]) == {option[:9]: "key-acme"}
    assert stdio_headers([option], {}) == [(b"x-api-key", b"key-acme")]


@pytest.mark.parametrize("option", ["X-API-Key key-acme", "=key-acme", ": key-acme"])
def test_a_malformed_header_names_both_forms_and_not_its_value(option: str) -> None:
    with pytest.raises(AppLoadError) as refused:
        stdio_headers([option], {})
    assert "expected NAME=VALUE or 'Name: value'" in str(refused.value) and "key-acme" not in str(refused.value)
    result = CliRunner().invoke(cli, ["check", "http://127.0.0.1:1/mcp", "-H", option])
    assert result.exit_code == 2 and "expected NAME=VALUE or 'Name: value'" in result.output and "key-acme" not in result.output


def test_check_help_shows_both_header_forms() -> None:
    result = CliRunner().invoke(cli, ["check", "--help"])
    assert "'Name: value' or NAME=VALUE" in " ".join(result.output.split())


# -- 6. Path() in a tool's dependency -------------------------------------------------------


def load_item(item_id: Annotated[int, Path(ge=1)]) -> int:
    return item_id


async def get(item: Annotated[int, Depends(load_item)]) -> int:
    """Get one item."""
    return item


def test_path_in_a_dependency_suggests_pydantic_field() -> None:
    with pytest.raises(ValueError, match=r"dependency 'load_item' of tool 'get': parameter 'item_id' is declared Path\(\)") as refused:
        make_router().tool(get)
    assert "`item_id: Annotated[int, Field(ge=1)]` (from pydantic import Field)" in str(refused.value)


# -- 7. phrasing: the missing-docstring notice, migrate --check on an unreachable database ---


def test_the_missing_docstring_notice_quotes_the_function_name(caplog: pytest.LogCaptureFixture) -> None:
    async def a(x: int) -> int:
        return x

    with caplog.at_level(logging.WARNING, logger="fastapi_mcp_ctx"):
        make_router().tool(a)
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "give the function 'test_the_missing_docstring_notice_quotes_the_function_name.<locals>.a' a docstring" in text
    assert "give a a docstring" not in text


def test_migrate_check_on_an_unreachable_database_names_the_error_not_retry_later() -> None:
    result = CliRunner().invoke(cli, ["migrate", "--check", "--url", "postgresql+asyncpg://user:hunter2@127.0.0.1:1/db"])
    assert result.exit_code == 1
    assert "cannot reach postgresql+asyncpg://user:***@127.0.0.1:1/db" in result.output
    assert "MCP_STORAGE_URL" in result.output and "retry later" not in result.output and "hunter2" not in result.output


def test_a_bare_router_given_as_the_app_is_refused_naming_include_router() -> None:
    """Served or tested alone, an McpRouter would be called as an ASGI app (which now refuses)."""
    with pytest.raises(ConfigurationError, match=r"not an app: include it in one \(app = FastAPI\(\); app\.include_router\(mcp_router\)\)"):
        McpTestClient(make_router())
    wrapped, target = _resolve_app(make_router(), "m:router", None)  # stdio wraps a bare router in an app
    assert target.app is wrapped
