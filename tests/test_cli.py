"""The ``fastapi-mcp-ctx`` command line (click's CliRunner), the probe behind ``check``, and one
real ``serve`` on a free port probed by ``check``."""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from conftest import make_app, mcp_settings
from fastapi import Depends, Header, HTTPException
from missing import hide
from servers import free_port, serving

from fastapi_mcp_ctx import Context, McpRouter, Principal, mcp_context
from fastapi_mcp_ctx.__main__ import main
from fastapi_mcp_ctx._probe import probe
from fastapi_mcp_ctx.cli import cli
from fastapi_mcp_ctx.settings import McpSettings
from fastapi_mcp_ctx.state import derive_cursor_key

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


# -- keygen ---------------------------------------------------------------------------------


def test_keygen_prints_32_random_bytes_urlsafe() -> None:
    keys = [run("keygen").output.strip() for _ in range(2)]
    assert keys[0] != keys[1]
    for key in keys:
        assert len(base64.urlsafe_b64decode(key + "=")) == 32
        assert set(key) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        assert McpSettings(request_state_key=key).request_state_key == key
        assert len(derive_cursor_key(key)) == 32


# -- migrate --------------------------------------------------------------------------------


def test_migrate_sqlite_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No alembic.ini, no checkout: the migrations ship in the package."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    env = {"MCP_STORAGE_URL": "sqlite+aiosqlite:///state.db"}  # relative: in the current folder
    unmigrated = runner.invoke(cli, ["migrate", "--check"], env=env)
    assert unmigrated.exit_code == 1 and "fastapi-mcp-ctx migrate" in unmigrated.output
    assert "no database file" in unmigrated.output and unmigrated.output.count("migrate") == 1
    assert not (tmp_path / "state.db").exists()  # a check creates nothing
    (tmp_path / "state.db").touch()
    empty = runner.invoke(cli, ["migrate", "--check"], env=env)
    assert empty.exit_code == 1 and empty.output.count("fastapi-mcp-ctx migrate") == 1, empty.output
    first = runner.invoke(cli, ["migrate"], env=env)
    assert first.exit_code == 0, first.output
    assert "upgraded from (none) to 0001" in first.output
    again = runner.invoke(cli, ["migrate"], env=env)
    assert again.exit_code == 0 and "already at 0001" in again.output
    checked = runner.invoke(cli, ["migrate", "--check"], env=env)
    assert checked.exit_code == 0 and "current" in checked.output
    assert (tmp_path / "state.db").is_file()


def test_migrate_url_option_wins_over_the_environment(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'opt.db'}"
    result = run("migrate", "--url", url, env={"MCP_STORAGE_URL": "memory://"})
    assert result.exit_code == 0, result.output
    assert (tmp_path / "opt.db").is_file()


def test_migrate_sql_prints_offline_sql() -> None:
    result = run("migrate", "--sql", "--url", "postgresql+asyncpg://u:pw@127.0.0.1:1/db")
    assert result.exit_code == 0, result.output
    assert "CREATE TABLE mcp_state" in result.output and "COMMIT" in result.output


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        ([], {"MCP_STORAGE_URL": ""}, "no database URL"),
        (["--url", "memory://"], {}, "need no migration"),
        (["--url", "redis://127.0.0.1:6379/0"], {}, "need no migration"),
    ],
)
def test_migrate_refuses_what_has_no_schema(args: list[str], env: dict[str, str], needle: str) -> None:
    result = run("migrate", *args, env=env)
    assert result.exit_code == 2 and needle in result.output


def test_migrate_unreachable_database_hides_the_password() -> None:
    result = run("migrate", "--url", "postgresql+asyncpg://user:hunter2@127.0.0.1:1/db")
    assert result.exit_code == 1
    assert "cannot migrate postgresql+asyncpg://user:***@127.0.0.1:1/db" in result.output
    assert "hunter2" not in result.output


def test_migrate_without_the_sql_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "sqlalchemy")
    result = run("migrate", "--url", "sqlite+aiosqlite:///x.db")
    assert result.exit_code == 1
    assert 'pip install "fastapi-mcp-ctx[sql]"' in result.output


@pytest.mark.postgres
async def test_migrate_postgres() -> None:
    from state.conftest import temporary_postgres_database

    from fastapi_mcp_ctx.backends.sql_migrations import current_revision

    async with temporary_postgres_database("mcp_cli") as url:
        result = await _in_thread(run, "migrate", env={"MCP_STORAGE_URL": url})
        assert result.exit_code == 0, result.output
        assert "upgraded from (none) to 0001" in result.output
        assert await current_revision(url) == "0001"


async def _in_thread(func: Any, *args: Any, **kwargs: Any) -> Any:
    """The CLI runs its own event loop (asyncio.run): call it off the test's loop."""
    import asyncio

    return await asyncio.to_thread(func, *args, **kwargs)


# -- serve ----------------------------------------------------------------------------------


def test_serve_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(app=app, **kwargs))
    result = CliRunner().invoke(cli, ["serve", "examples.quickstart:app", "--app-dir", str(ROOT)])
    assert result.exit_code == 0, result.output
    assert "MCP endpoint http://127.0.0.1:8000/mcp" in result.output
    from examples.quickstart import app

    assert seen["app"] is app  # one process: the imported app itself
    assert (seen["host"], seen["port"], seen["workers"], seen["reload"]) == ("127.0.0.1", 8000, 1, False)
    assert seen["proxy_headers"] is False  # uvicorn's own default is True
    assert seen["timeout_graceful_shutdown"] == 10.0


@pytest.mark.parametrize(("mode", "warned"), [(None, True), ("none", False), ("jwt", False)])
def test_serve_on_every_interface_without_auth_warns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mode: str | None, warned: bool
) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    settings = {None: "", "none": "auth_mode='none'", "jwt": (
        "auth_mode='jwt', jwt_secret='s' * 32, jwt_issuer='https://idp.example.test', resource_url='https://mcp.example.test/mcp'"
    )}[mode]  # fmt: skip
    name = f"auth_app_{mode or 'unset'}"
    (tmp_path / f"{name}.py").write_text(
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter, McpSettings\n"
        f"app = FastAPI()\napp.include_router(McpRouter(settings=McpSettings({settings})))\n"
    )
    monkeypatch.delenv("MCP_AUTH_MODE", raising=False)
    result = CliRunner().invoke(cli, ["serve", f"{name}:app", "--app-dir", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 0, result.output
    assert ("no authentication is configured" in result.output and "MCP_AUTH_MODE" in result.output) == warned


def test_serve_with_workers_passes_the_import_string(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import uvicorn

    (tmp_path / "shared_app.py").write_text(
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter, McpSettings\n"
        f"settings = McpSettings(session_mode='stateless', storage_url='sqlite+aiosqlite:///{tmp_path}/s.db',"
        f" request_state_key={secrets.token_urlsafe(32)!r})\n"
        "app = FastAPI()\n"
        "app.include_router(McpRouter(settings=settings))\n"
    )
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(app=app, **kwargs))
    args = ["serve", "shared_app:app", "--app-dir", str(tmp_path), "--host", "::1", "--port", "9001", "--workers", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "http://[::1]:9001/mcp" in result.output
    assert seen["app"] == "shared_app:app" and seen["workers"] == 2


def test_serve_with_workers_refuses_a_per_process_request_state_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import uvicorn

    (tmp_path / "keyless_app.py").write_text(
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter, McpSettings\n"
        f"settings = McpSettings(session_mode='stateless', storage_url='sqlite+aiosqlite:///{tmp_path}/s.db')\n"
        "app = FastAPI()\n"
        "app.include_router(McpRouter(settings=settings))\n"
    )
    monkeypatch.delenv("MCP_REQUEST_STATE_KEY", raising=False)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: pytest.fail("uvicorn must not start"))
    result = CliRunner().invoke(cli, ["serve", "keyless_app:app", "--app-dir", str(tmp_path), "--workers", "2"])
    assert result.exit_code == 2
    assert "MCP_REQUEST_STATE_KEY" in result.output and "fastapi-mcp-ctx keygen" in result.output


def test_serve_with_workers_refuses_state_that_lives_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: pytest.fail("uvicorn must not start"))
    result = CliRunner().invoke(cli, ["serve", "examples.quickstart:app", "--app-dir", str(ROOT), "--workers", "2"])
    assert result.exit_code == 2
    assert "2025 sessions are kept in this process's memory" in result.output
    assert "ctx.state is in this process's memory" not in result.output  # its default: refused at first use instead
    assert "MCP_SESSION_MODE=stateless" in result.output and "--workers 1" in result.output


@pytest.mark.parametrize(
    ("spec", "needle"),
    [("examples.quickstart", "<module>:<attribute>"), ("no_such_module_xyz:app", "Could not import module"), ("examples.quickstart:nope", "nope")],
)
def test_serve_bad_app(spec: str, needle: str) -> None:
    result = CliRunner().invoke(cli, ["serve", spec, "--app-dir", str(ROOT)])
    assert result.exit_code == 2 and needle in result.output


def test_serve_app_whose_storage_extra_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "redis_app.py").write_text(
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter, McpSettings\n"
        "app = FastAPI()\n"
        "app.include_router(McpRouter(settings=McpSettings(storage_url='redis://127.0.0.1:1/0')))\n"
    )
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("serve must stop before uvicorn runs"))
    hide(monkeypatch, "redis", "fastapi_mcp_ctx.backends.redis")
    result = CliRunner().invoke(cli, ["serve", "redis_app:app", "--app-dir", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "redis_app:app: the storage URL redis:// needs the 'redis' extra" in result.output
    assert 'pip install "fastapi-mcp-ctx[redis]"' in result.output


def test_serve_without_the_server_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "uvicorn")
    result = CliRunner().invoke(cli, ["serve", "examples.quickstart:app"])
    assert result.exit_code == 1 and 'pip install "fastapi-mcp-ctx[server]"' in result.output


def test_entry_point_without_click(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "click", "fastapi_mcp_ctx.cli")
    with pytest.raises(SystemExit) as info:
        main()
    assert 'pip install "fastapi-mcp-ctx[cli]"' in str(info.value.code)


# -- stdio ----------------------------------------------------------------------------------


def test_stdio_hands_the_app_spec_and_path_to_the_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi_mcp_ctx import cli

    calls: list[tuple[str, str | None, tuple[str, ...]]] = []
    monkeypatch.setattr(cli, "run_stdio", lambda spec, path=None, headers=(): calls.append((spec, path, tuple(headers))))
    assert run("stdio", "examples.quickstart:app").exit_code == 0
    assert run("stdio", "examples.quickstart:app", "--path", "/mcp", "--header", "X-API-Key=k", "--header", "X-B=2").exit_code == 0
    assert calls == [("examples.quickstart:app", None, ()), ("examples.quickstart:app", "/mcp", ("X-API-Key=k", "X-B=2"))]


def test_stdio_with_an_app_that_names_nothing_servable_exits_2_with_the_reason() -> None:
    result = run("stdio", "examples.quickstart:no_such_attr")
    assert result.exit_code == 2
    assert "no_such_attr" in result.output


# -- check (the probe, in process) ----------------------------------------------------------


def _app(**settings: Any) -> Any:
    router = McpRouter(settings=mcp_settings(**settings))

    @router.tool()
    async def echo(text: str, ctx: Context = Depends(mcp_context)) -> str:
        """Echo."""
        return text

    return make_app(router)


async def _probe_app(app: Any, url: str = "http://127.0.0.1/mcp", **kwargs: Any) -> Any:
    return await probe(url, transport=httpx.ASGITransport(app=app), **kwargs)


async def test_probe_reports_both_eras() -> None:
    report = await _probe_app(_app(page_size=1, server_name="probed", server_version="9"))
    text = report.render()
    assert report.ok, text
    assert [(s.era, s.name) for s in report.steps] == [
        ("2025 (2025-11-25)", "initialize"),
        ("2025 (2025-11-25)", "tools/list"),
        ("2026-07-28", "server/discover"),
        ("2026-07-28", "tools/list"),
    ]
    init, tools, discover, _ = report.steps
    assert init.facts["server"] == "probed 9" and init.facts["protocol"] == "2025-11-25"
    assert len(init.facts["session"]) == 32 and "tools" in init.facts["capabilities"]
    assert tools.facts["tools"] == "1 (1 page)"
    assert discover.facts["versions"] == "2026-07-28" and discover.facts["server"] == "probed 9"
    assert all(s.ms > 0 for s in report.steps) and " ms" in text
    assert text.endswith("OK: the server answers both protocol eras")


async def test_probe_counts_the_resources_and_prompts_a_server_offers() -> None:
    router = McpRouter(settings=mcp_settings(page_size=2))

    @router.resource("notes://{note_id}", name="note")
    async def note(note_id: str) -> str:
        return note_id

    for uri in ("docs://a", "docs://b", "docs://c"):
        router.resource(uri, name=uri)(lambda: "text")

    @router.prompt()
    async def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello {name}"

    report = await _probe_app(make_app(router))
    assert report.ok, report.render()
    counted = {(s.era, s.name): s.facts for s in report.steps}
    for era in ("2025 (2025-11-25)", "2026-07-28"):
        assert counted[(era, "tools/list")] == {"tools": "0 (1 page)"}
        assert counted[(era, "resources/list")] == {"resources": "3 (2 pages)"}
        assert counted[(era, "resources/templates/list")] == {"resourceTemplates": "1 (1 page)"}
        assert counted[(era, "prompts/list")] == {"prompts": "1 (1 page)"}
    step_lines = [line for line in report.render().splitlines() if line.endswith(" ms")]
    assert len({line.index(" ok ") for line in step_lines}) == 1, "the status column is aligned"


async def test_probe_stateless_server() -> None:
    report = await _probe_app(_app(session_mode="stateless"))
    assert report.ok and report.steps[0].facts["session"] == "(none: stateless server)"


async def test_probe_421_names_mcp_allowed_hosts() -> None:
    report = await _probe_app(_app(dns_rebinding_protection=True), "http://evil.example/mcp")
    assert not report.ok and report.fatal is not None
    assert "HTTP 421" in report.fatal and "MCP_ALLOWED_HOSTS" in report.fatal and "evil.example" in report.fatal


async def test_probe_401_asks_for_credentials_and_header_option_passes_them() -> None:
    def authenticate(authorization: str | None = Header(default=None)) -> Principal | None:
        return Principal(subject="probe", tenant_id="t") if authorization == "Bearer ok" else None

    router = McpRouter(settings=mcp_settings(auth_mode="jwt"), authenticate=authenticate)  # a bearer mode: Bearer challenge
    app = make_app(router)
    refused = await _probe_app(app)
    assert refused.fatal is not None and "HTTP 401" in refused.fatal and "-H 'Authorization: Bearer" in refused.fatal
    assert "WWW-Authenticate: Bearer" in refused.fatal
    admitted = await _probe_app(app, headers={"Authorization": "Bearer ok"})
    assert admitted.ok, admitted.render()


async def test_probe_401_without_a_challenge_says_the_apps_authenticate_refused_and_gives_no_bearer_advice() -> None:
    """Issue 22 item 6: an X-API-Key app's ``authenticate`` returning None once drew a Bearer
    challenge and ``-H 'Authorization: Bearer <token>'`` advice; it names no scheme now."""

    def authenticate(x_api_key: str | None = Header(default=None)) -> Principal | None:
        return Principal(subject="probe", tenant_id="t") if x_api_key == "k1" else None

    app = make_app(McpRouter(settings=mcp_settings(), authenticate=authenticate))
    refused = await _probe_app(app)
    assert refused.fatal is not None and "HTTP 401" in refused.fatal
    assert "authenticate" in refused.fatal and "no WWW-Authenticate" in refused.fatal
    assert "Bearer" not in refused.fatal
    assert (await _probe_app(app, headers={"X-API-Key": "k1"})).ok


async def test_probe_401_with_the_apps_own_scheme_names_it() -> None:
    def authenticate(x_api_key: str | None = Header(default=None)) -> Principal | None:
        raise HTTPException(401, "key please", headers={"WWW-Authenticate": 'ApiKey header="X-API-Key"'})

    refused = await _probe_app(make_app(McpRouter(settings=mcp_settings(), authenticate=authenticate)))
    assert refused.fatal is not None and "'ApiKey'" in refused.fatal and 'WWW-Authenticate: ApiKey header="X-API-Key"' in refused.fatal
    assert "Bearer" not in refused.fatal


def _mock_server(answer: Callable[[dict[str, Any]], httpx.Response], seen: list[tuple[str, str | None]]) -> httpx.MockTransport:
    """A scripted server: ``DELETE`` 200, a notification 202, a request ``answer(body)``; every
    request's method and session id go to ``seen``."""

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.headers.get("mcp-session-id")))
        if request.method == "DELETE":
            return httpx.Response(200)
        body = json.loads(request.content)
        return answer(body) if "id" in body else httpx.Response(202)

    return httpx.MockTransport(handler)


async def test_probe_reads_sse_and_reports_a_server_without_the_2026_era() -> None:
    """A 2025-only server answering over SSE: the legacy steps pass, discover fails, exit 1."""

    def answer(body: dict[str, Any]) -> httpx.Response:
        if body["method"] == "server/discover":
            error = {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "Method not found"}}
            return httpx.Response(200, json=error)
        result: dict[str, Any] = (
            {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "old", "version": "1"}}
            if body["method"] == "initialize"
            else {"tools": [{"name": "a"}, {"name": "b"}]}
        )
        event = f"event: message\r\nid: 1\r\ndata: {json.dumps({'jsonrpc': '2.0', 'id': body['id'], 'result': result})}\r\n\r\n"
        return httpx.Response(200, text=": ping\n\n" + event, headers={"content-type": "text/event-stream", "mcp-session-id": "s1"})

    report = await probe("http://127.0.0.1:9/mcp", transport=_mock_server(answer, []))
    assert not report.ok and report.fatal is None
    assert report.steps[0].facts["capabilities"] == "tools(listChanged)" and report.steps[0].facts["session"] == "s1"
    assert report.steps[1].facts["tools"] == "2 (1 page)"
    failed = report.steps[2]
    assert (failed.name, failed.ok) == ("server/discover", False) and "-32601" in (failed.error or "")
    assert "FAILED: 2026-07-28 server/discover" in report.render()


async def test_probe_leaves_no_session_and_no_stream_open() -> None:
    """After `check`, the server holds nothing of it: its 2025 session is ended (DELETE) and no
    stream is open: none registered for shutdown, none held by the notifier."""
    router = McpRouter(settings=mcp_settings())

    @router.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    app = make_app(router)
    coordinator = router.shutdown_coordinator
    report = await _probe_app(app)
    assert report.ok, report.render()
    session = report.steps[0].facts["session"]
    assert await router.sessions.get(session) is None
    assert not coordinator._streams  # type: ignore[attr-defined]
    assert not coordinator._held  # type: ignore[attr-defined]  # resumable call streams
    assert router.notifier.open_streams() == 0


async def test_probe_ends_its_session_when_a_step_fails() -> None:
    """tools/list fails: the step is reported failed, and the session is still DELETEd."""
    seen: list[tuple[str, str | None]] = []

    def answer(body: dict[str, Any]) -> httpx.Response:
        if body["method"] == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result}, headers={"mcp-session-id": "s1"})
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32603, "message": "boom"}})

    report = await probe("http://127.0.0.1:9/mcp", transport=_mock_server(answer, seen))
    assert not report.ok
    assert [(s.name, s.ok) for s in report.steps][:2] == [("initialize", True), ("tools/list", False)]
    # initialize, notifications/initialized, tools/list, then DELETE, before the 2026 era's requests
    assert seen[:5] == [("POST", None), ("POST", "s1"), ("POST", "s1"), ("DELETE", "s1"), ("POST", None)]


def test_check_connection_refused() -> None:
    result = run("check", f"http://127.0.0.1:{free_port()}/mcp", "--timeout", "5")
    assert result.exit_code == 1
    assert "connection refused" in result.output and "is the server running?" in result.output


def test_check_bad_header_option() -> None:
    result = run("check", "http://127.0.0.1:1/mcp", "-H", "no-colon")
    assert result.exit_code == 2 and "expected NAME=VALUE or 'Name: value'" in result.output


# -- one real server ------------------------------------------------------------------------


def test_serve_then_check() -> None:
    """`python -m fastapi_mcp_ctx serve examples.quickstart:app` on a free port (real uvicorn),
    probed by `fastapi-mcp-ctx check`."""
    port = free_port()
    argv = [sys.executable, "-m", "fastapi_mcp_ctx", "serve", "examples.quickstart:app", "--port", str(port)]
    with serving(argv, port, env={**os.environ, "MCP_STORAGE_URL": "memory://"}, cwd=ROOT) as served:
        result = run("check", served.url)
    assert result.exit_code == 0, result.output
    for needle in ("initialize", "server/discover", "2025-11-25", "2026-07-28", "tools:         7 (1 page)", "session:"):
        assert needle in result.output, (needle, result.output)
    assert f"MCP endpoint http://127.0.0.1:{port}/mcp" in served.output, served.output
    assert served.returncode in (0, -15), served.output  # uvicorn re-raises the SIGTERM it handled


@pytest.mark.parametrize(("args", "expected"), [([], None), (["--log-level", "warning"], "warning"), (["--log-level", "trace"], "debug")])
def test_serve_log_level_given_explicitly_sets_the_library_floor(
    monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str | None
) -> None:
    import uvicorn

    monkeypatch.setenv("MCP_LOG_LEVEL", "recorded")  # so that monkeypatch restores the absence afterwards
    monkeypatch.delenv("MCP_LOG_LEVEL")
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    result = CliRunner().invoke(cli, ["serve", "examples.quickstart:app", "--app-dir", str(ROOT), *args])
    assert result.exit_code == 0, result.output
    assert os.environ.get("MCP_LOG_LEVEL") == expected


def test_serve_log_level_leaves_an_explicit_mcp_log_level(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setenv("MCP_LOG_LEVEL", "error")
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    assert CliRunner().invoke(cli, ["serve", "examples.quickstart:app", "--app-dir", str(ROOT), "--log-level", "debug"]).exit_code == 0
    assert os.environ["MCP_LOG_LEVEL"] == "error"


SHARED_KEY = "7e" * 32  # MCP_REQUEST_STATE_KEY: replicas sharing stores need one (32 bytes, hex)


@pytest.mark.parametrize("state_url", ["redis", "sqlite"])
def test_serve_with_workers_accepts_sessions_shared_through_redis(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, state_url: str) -> None:
    import uvicorn

    state = "redis://127.0.0.1:1/0" if state_url == "redis" else f"sqlite+aiosqlite:///{tmp_path}/s.db"
    (tmp_path / "replicated_app.py").write_text(
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter, McpSettings\n"
        f"KEY = {SHARED_KEY!r}\n"
        f"settings = McpSettings(session_store_url='redis://127.0.0.1:1/0', storage_url={state!r}, request_state_key=KEY)\n"
        "app = FastAPI()\n"
        "app.include_router(McpRouter(settings=settings))\n"
    )
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(app=app, **kwargs))
    result = CliRunner().invoke(cli, ["serve", "replicated_app:app", "--app-dir", str(tmp_path), "--workers", "3"])
    assert result.exit_code == 0, result.output  # nothing connects before the workers start
    assert seen["app"] == "replicated_app:app" and seen["workers"] == 3


def test_serve_with_workers_refuses_memory_state_chosen_explicitly_next_to_a_redis_session_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import uvicorn

    (tmp_path / "half_app.py").write_text(
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter, McpSettings\n"
        f"KEY = {SHARED_KEY!r}\n"
        "app = FastAPI()\n"
        "settings = McpSettings(session_store_url='redis://127.0.0.1:1/0', storage_url='memory://', request_state_key=KEY)\n"
        "app.include_router(McpRouter(settings=settings))\n"
    )
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: pytest.fail("uvicorn must not start"))
    result = CliRunner().invoke(cli, ["serve", "half_app:app", "--app-dir", str(tmp_path), "--workers", "2"])
    assert result.exit_code == 2
    assert "MCP_STORAGE_URL=memory:// set explicitly" in result.output and "2025 sessions" not in result.output


def test_serve_with_workers_starts_with_default_memory_state_and_says_its_first_use_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``ctx.state`` left at its default: an app that never uses it is served by N workers (it
    used to be refused); the notice names what to set, and each worker refuses ctx.state at its
    first use (tests/test_per_process_state.py)."""
    import uvicorn

    from fastapi_mcp_ctx.backends._per_process import SERVE_WORKERS_ENV

    (tmp_path / "stateless_app.py").write_text(
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter, McpSettings\n"
        f"KEY = {SHARED_KEY!r}\n"
        "app = FastAPI()\n"
        "settings = McpSettings(session_store_url='redis://127.0.0.1:1/0', request_state_key=KEY)\n"
        "app.include_router(McpRouter(settings=settings))\n"
    )
    monkeypatch.delenv("MCP_STORAGE_URL", raising=False)
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(app=app, workers_env=os.environ.get(SERVE_WORKERS_ENV), **kwargs))
    result = CliRunner().invoke(cli, ["serve", "stateless_app:app", "--app-dir", str(tmp_path), "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert seen["workers"] == 2 and seen["workers_env"] == "2"
    assert "first use of ctx.state will fail" in result.output and "MCP_STORAGE_URL=redis://" in result.output
    assert SERVE_WORKERS_ENV not in os.environ  # only the workers carry it


async def test_probe_421_names_the_host_header_actually_sent() -> None:
    app = _app(dns_rebinding_protection=True)
    report = await _probe_app(app, headers={"Host": "evil.example:9"})
    assert report.fatal is not None and "'evil.example:9'" in report.fatal, report.fatal


async def test_probe_403_passes_on_what_the_server_says() -> None:
    router = McpRouter(settings=mcp_settings(auth_mode=None))  # no auth configured: local requests only
    transport = httpx.ASGITransport(app=make_app(router), client=("203.0.113.7", 4000))  # not loopback
    report = await probe("http://127.0.0.1/mcp", transport=transport)
    assert report.fatal is not None and "HTTP 403" in report.fatal and "MCP_AUTH_MODE" in report.fatal, report.fatal
