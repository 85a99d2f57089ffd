"""docs/deployment.md is tested: its Python runs and serves the readiness probe it describes,
its nginx block is the committed template, every MCP_* it names is a setting, its table of
shared settings covers what compose gives every replica, and every command-line option it
shows exists (``fastapi-mcp-ctx serve``, uvicorn)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import httpx
import yaml
from conftest import open_client
from uvicorn.main import main as uvicorn_command

from fastapi_mcp_ctx import McpSettings
from fastapi_mcp_ctx.cli import cli

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "deployment.md"
FENCE = re.compile(r'^```(\w*)(?: title="([^"]+)")?\n(.*?)^```', re.DOTALL | re.MULTILINE)


def _blocks(lang: str) -> list[tuple[str | None, str]]:
    return [(m.group(2), m.group(3)) for m in FENCE.finditer(DOC.read_text(encoding="utf-8")) if m.group(1) == lang]


def _section(heading: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


async def test_python_blocks_run_and_the_probe_answers_where_the_doc_says() -> None:
    (block,) = [code for title, code in _blocks("python") if title is None]
    namespace: dict[str, Any] = {"__name__": "deployment_doc"}
    exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102
    async with open_client(namespace["app"]) as client:
        response: httpx.Response = await client.get("/mcp/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["ready"] is True and body["shuttingDown"] is False
    assert set(body["checks"]) == {"sessions", "events", "bus", "state"}  # the keys the doc names
    for key in ("sessions", "events", "bus", "state", "shuttingDown", "Retry-After: 1"):
        assert key in _section("Readiness")


def test_the_nginx_block_is_the_committed_template() -> None:
    (block,) = _blocks("nginx")
    title, code = block
    assert title == "deploy/nginx.conf.template"
    assert code == (REPO / title).read_text(encoding="utf-8")


def test_every_setting_named_is_a_real_one() -> None:
    fields = {f"MCP_{name.upper()}" for name in McpSettings.model_fields}
    named = set(re.findall(r"\bMCP_[A-Z_]+[A-Z]\b", DOC.read_text(encoding="utf-8")))
    assert named and named <= fields, sorted(named - fields)


def test_the_shared_settings_table_covers_what_compose_shares() -> None:
    services = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    shared = {k for k in services["replica-1"]["environment"] if k.startswith("MCP_")} - {"MCP_AUTH_MODE"}
    table = _section("Settings every replica shares")
    missing = sorted(name for name in shared | {"MCP_AUTH_MODE"} if f"`{name}`" not in table)
    assert not missing, f"docs/deployment.md's table does not list {missing}"


def _options(command: Any) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def test_every_command_line_option_shown_exists() -> None:
    serve, uvicorn_main = _options(cli.commands["serve"]), _options(uvicorn_command)
    text = "\n".join(code for _, code in _blocks("bash")) + DOC.read_text(encoding="utf-8")
    checked = 0
    for line in text.splitlines():
        for program, known in (("fastapi-mcp-ctx serve", serve), ("uvicorn", uvicorn_main)):
            if (at := line.find(f"{program} ")) == -1:
                continue
            words = shlex.split(line[at:].split("`")[0].split("#")[0], posix=True)
            for word in words:
                if word.startswith("--"):
                    assert word.split("=")[0] in known, f"{program} has no option {word}: {line}"
                    checked += 1
    assert checked >= 5


def test_readme_links_the_deployment_guide() -> None:
    assert "(docs/deployment.md)" in (REPO / "README.md").read_text(encoding="utf-8")


async def test_the_cors_example_is_the_file_and_browsers_get_their_answers(monkeypatch: Any) -> None:
    """The CORS block is examples/cors_app.py verbatim; a preflight from the allowed origin is
    answered, a 2025 initialize from it exposes Mcp-Session-Id, another origin is refused."""
    import importlib

    block = [code for title, code in _blocks("python") if title == "examples/cors_app.py"]
    assert block == [(REPO / "examples" / "cors_app.py").read_text(encoding="utf-8")]
    from fastapi_mcp_ctx.settings import get_settings

    monkeypatch.setenv("MCP_ALLOWED_ORIGINS", "https://app.example.com")
    get_settings.cache_clear()  # the router reads the environment once a process
    try:
        module = importlib.reload(importlib.import_module("examples.cors_app"))
    finally:
        get_settings.cache_clear()
    origin = {"Origin": "https://app.example.com"}
    async with open_client(module.app) as client:
        preflight = await client.options(
            "/mcp",
            headers={**origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,mcp-protocol-version"},
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}},
        }
        accept = {"Accept": "application/json, text/event-stream"}
        answered = await client.post("/mcp", json=initialize, headers={**origin, **accept})
        assert answered.status_code == 200 and answered.headers.get("mcp-session-id")
        assert "mcp-session-id" in answered.headers["access-control-expose-headers"].lower()
        refused = await client.post("/mcp", json=initialize, headers={"Origin": "https://evil.example", **accept})
        assert refused.status_code == 403
