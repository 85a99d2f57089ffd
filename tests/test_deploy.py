"""compose.yaml and the Dockerfile stay consistent with the package (no Docker engine needed):
one image built once and shared by the migrate and app services, a non-root user, commands
that exist in the CLI, settings the package accepts, and an example app that uses ctx.state."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fastapi_mcp_ctx import McpSettings
from fastapi_mcp_ctx.backends import backend_from_url
from fastapi_mcp_ctx.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]


_REQUIRED = re.compile(r"^\$\{(\w+):\?[^}]*\}$")


def _environment(service: dict[str, Any], **values: str) -> dict[str, str]:
    """A service's environment as compose interpolates it: ``${NAME:?message}`` takes ``values[NAME]``
    (compose refuses to start when it is unset)."""
    out: dict[str, str] = {}
    for name, value in service["environment"].items():
        required = _REQUIRED.match(str(value))
        out[name] = values[required.group(1)] if required else str(value)
    return out


def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def _cli_command(argv: list[str]) -> str:
    """The subcommand ``argv`` runs, after checking it is our console script and it exists."""
    assert argv[0] == "fastapi-mcp-ctx", argv
    assert argv[1] in cli.commands, f"{argv[1]!r} is not a fastapi-mcp-ctx command"
    return argv[1]


def test_compose_services_and_settings_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    services = _compose()
    cluster = {*(f"redis-node-{i}" for i in range(1, 7)), "cluster-init", "cluster-replica-1", "cluster-replica-2", "cluster-nginx"}
    assert set(services) == {"postgres", "migrate", "mcp", "redis", "replica-1", "replica-2", "nginx", *cluster}
    assert all(services[name].get("profiles") == ["replicas"] for name in ("redis", "replica-1", "replica-2", "nginx"))
    assert all(services[name].get("profiles") == ["cluster"] for name in cluster)  # docs/deployment.md: Redis Cluster
    assert _REQUIRED.match(services["mcp"]["environment"]["MCP_REQUEST_STATE_KEY"])  # compose asks for it
    for name, value in _environment(services["mcp"], MCP_REQUEST_STATE_KEY=secrets.token_urlsafe(32)).items():
        monkeypatch.setenv(name, value)
    settings = McpSettings()  # read from the environment exactly as the container does
    assert settings.allowed_hosts and settings.allowed_origins
    assert settings.storage_url.startswith("postgresql+asyncpg://")  # ctx.state on PostgreSQL
    backend_from_url(settings.storage_url)  # a URL the package accepts (no I/O)
    assert services["migrate"]["environment"]["MCP_STORAGE_URL"] == settings.storage_url


def test_one_image_built_once_and_shared() -> None:
    services = _compose()
    built = [name for name, service in services.items() if "build" in service]
    assert built == ["migrate"]
    image = services["migrate"]["image"]
    assert services["mcp"]["image"] == image and "build" not in services["mcp"]
    assert services["mcp"]["pull_policy"] == "never"  # a local image: never look for it in a registry
    assert services["mcp"]["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}


def test_migrate_and_serve_use_the_cli() -> None:
    services = _compose()
    assert _cli_command(services["migrate"]["command"]) == "migrate"
    cmd = re.search(r"^CMD (\[.*\])$", _dockerfile(), re.MULTILINE)
    assert cmd is not None
    argv = json.loads(cmd.group(1))
    assert _cli_command(argv) == "serve" and "examples.quickstart:app" in argv
    assert "mcp" not in services or "command" not in services["mcp"]  # the image's CMD serves
    assert _cli_command(services["mcp"]["healthcheck"]["test"][1:]) == "check"
    assert "alembic" not in (ROOT / "compose.yaml").read_text() + _dockerfile()


def test_image_runs_as_a_non_root_user() -> None:
    users = re.findall(r"^USER\s+(\S+)", _dockerfile(), re.MULTILINE)
    assert users, "the Dockerfile sets no USER: the containers would run as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    for name in ("migrate", "mcp"):
        assert str(_compose()[name].get("user", users[-1])).split(":")[0] not in ("root", "0"), name


def test_dockerfile_copies_what_the_image_runs() -> None:
    dockerfile = _dockerfile()
    for path in ("pyproject.toml", "README.md", "fastapi_mcp_ctx", "examples"):
        assert re.search(rf"^COPY .*\b{re.escape(path)}\b", dockerfile, re.MULTILINE), path
    install = re.search(r"pip install '\.\[([a-z,]+)\]'", dockerfile)
    assert install is not None
    assert {"server", "sql", "cli"} <= set(install.group(1).split(","))  # serve, migrate, check


@pytest.mark.postgres
async def test_compose_rehearsal_on_postgres(tmp_path: Path) -> None:
    """What `docker compose up` runs, without Docker: the migrate service's command, then the
    image's CMD with the mcp service's environment (PostgreSQL: a temporary database; the
    port: a free one); a memo stored through MCP is a row of mcp_state, and the healthcheck
    command passes."""
    import sqlalchemy as sa
    from servers import call_tool, free_port, serving
    from sqlalchemy.ext.asyncio import create_async_engine
    from state.conftest import temporary_postgres_database

    services = _compose()
    script = str(Path(sys.executable).with_name("fastapi-mcp-ctx"))
    async with temporary_postgres_database("mcp_compose") as url:
        mcp_env = _environment(services["mcp"], MCP_REQUEST_STATE_KEY=secrets.token_urlsafe(32))
        env = {**os.environ, **mcp_env, "MCP_STORAGE_URL": url}
        migrate = await asyncio.to_thread(
            subprocess.run, [script, *services["migrate"]["command"][1:]], env=env, cwd=tmp_path,
            capture_output=True, text=True, timeout=120,
        )
        assert migrate.returncode == 0, migrate.stdout + migrate.stderr
        port = free_port()
        argv = json.loads(re.search(r"^CMD (\[.*\])$", _dockerfile(), re.MULTILINE).group(1))  # type: ignore[union-attr]
        argv = [script, *argv[1:]]
        argv[argv.index("--host") + 1], argv[argv.index("--port") + 1] = "127.0.0.1", str(port)
        with serving(argv, port, env=env, cwd=ROOT) as served:
            reply = await asyncio.to_thread(call_tool, served.url, "remember", {"key": "groceries", "text": "milk"})
            assert reply["result"]["isError"] is False, reply
            health = services["mcp"]["healthcheck"]["test"][1:]
            health[health.index("http://127.0.0.1:8000/mcp")] = served.url
            probe = await asyncio.to_thread(
                subprocess.run, [script, *health[1:]], env=env, capture_output=True, text=True, timeout=60
            )
            assert probe.returncode == 0, probe.stdout + probe.stderr
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                rows = (await conn.execute(sa.text("SELECT key, value FROM mcp_state"))).all()
        finally:
            await engine.dispose()
        assert [(k, json.loads(v)) for k, v in rows] == [("t/default/memos/groceries", "milk")]
