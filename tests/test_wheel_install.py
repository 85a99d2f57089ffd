"""A pip-install user's path, end to end: build the wheel, install it with its extras into a
fresh venv outside the repository, and in a throwaway project (no checkout, no alembic.ini)
run `fastapi-mcp-ctx migrate` against PostgreSQL (a temporary database) and SQLite, serve a
tool that uses ctx.state with real uvicorn on a free port, and find the value in the
database (and again after a restart).

Marked ``slow`` (under a minute: pip reuses its cache; every step is bounded in time; deselect
with ``-m "not slow"``); it needs real PostgreSQL (``MCP_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import sqlalchemy as sa
from servers import call_tool, free_port, serving
from sqlalchemy.ext.asyncio import create_async_engine
from state.conftest import temporary_postgres_database

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

APP = textwrap.dedent(
    '''
    from fastapi import Depends, FastAPI

    from fastapi_mcp_ctx import Context, McpRouter, mcp_context

    router = McpRouter()


    @router.tool()
    async def put(key: str, value: str, ctx: Context = Depends(mcp_context)) -> str:
        """Store value under key in ctx.state."""
        await ctx.state.set(key, value)
        return value


    @router.tool()
    async def fetch(key: str, ctx: Context = Depends(mcp_context)) -> str:
        """The value stored under key ('' when none)."""
        return await ctx.state.get(key, str) or ""


    app = FastAPI()
    app.include_router(router)
    '''
)


def _run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: nothing pointing at this checkout or its venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT)))
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return {**env, **extra}


async def _rows(url: str) -> list[tuple[str, str]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return [(k, json.loads(v)) for k, v in (await conn.execute(sa.text("SELECT key, value FROM mcp_state"))).all()]
    finally:
        await engine.dispose()


def _build_and_install(tmp: Path) -> Path:
    """The wheel, built from this checkout, installed with every extra a deployment uses."""
    env = _clean_env()
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)], cwd=tmp, env=env, timeout=300)
    (wheel,) = dist.glob("fastapi_mcp_ctx-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("migrations/env.py", "migrations/script.py.mako", "migrations/versions/0001_state.py", "cli.py"):
        assert f"fastapi_mcp_ctx/{shipped}" in names, shipped
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp, env=env, timeout=120)
    spec = f"fastapi-mcp-ctx[server,redis,sql,cli] @ {wheel.as_uri()}"
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", spec], cwd=tmp, env=env, timeout=600)
    return venv / "bin"


async def _migrate_serve_persist(bin_dir: Path, project: Path, url: str, server: list[str], port: int) -> None:
    # ctx.state on PostgreSQL is shared by replicas: the router refuses to start without a sealing key
    env = _clean_env(MCP_STORAGE_URL=url, MCP_REQUEST_STATE_KEY=secrets.token_urlsafe(32))
    out = await asyncio.to_thread(_run, [str(bin_dir / "fastapi-mcp-ctx"), "migrate"], cwd=project, env=env, timeout=120)
    assert "upgraded from (none) to 0001" in out, out
    for attempt in ("first", "after a restart"):
        with serving(server, port, env=env, cwd=project) as served:
            if attempt == "first":
                reply = await asyncio.to_thread(call_tool, served.url, "put", {"key": "greeting", "value": "hello"})
            else:
                reply = await asyncio.to_thread(call_tool, served.url, "fetch", {"key": "greeting"})
        assert reply["result"]["isError"] is False and reply["result"]["structuredContent"] == {"result": "hello"}, (
            reply,
            served.output,
        )
    assert await _rows(url) == [("t/default/greeting", "hello")]


async def test_installed_wheel_migrates_and_serves_ctx_state(tmp_path: Path) -> None:
    bin_dir = await asyncio.to_thread(_build_and_install, tmp_path)
    project = tmp_path / "project"  # a user's folder: no checkout, no alembic.ini
    project.mkdir()
    (project / "app.py").write_text(APP)
    where = _run([str(bin_dir / "python"), "-c", "import fastapi_mcp_ctx; print(fastapi_mcp_ctx.__file__)"],
                 cwd=project, env=_clean_env(), timeout=60)
    assert where.strip().startswith(str(tmp_path / "venv")), where

    async with temporary_postgres_database("mcp_wheel") as pg_url:
        port = free_port()
        uvicorn = [str(bin_dir / "uvicorn"), "app:app", "--host", "127.0.0.1", "--port", str(port)]
        await _migrate_serve_persist(bin_dir, project, pg_url, uvicorn, port)

    port = free_port()
    cli_serve = [str(bin_dir / "fastapi-mcp-ctx"), "serve", "app:app", "--port", str(port)]
    await _migrate_serve_persist(bin_dir, project, f"sqlite+aiosqlite:///{project / 'state.db'}", cli_serve, port)
