"""The app tests/test_stdio.py serves over stdio (imported in the server process only).

It misbehaves on purpose: it prints to stdout at import time and in tools, logs through a
handler bound to stdout, runs child processes that inherit stdout and stdin, and reads
stdin. Its lifespan opens a "pool" that tools see through ``request.state``; startup and
shutdown are written to the file named by ``STDIO_TEST_MARKER`` (when set).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import BackgroundTasks, Depends, FastAPI, Header, Request

from fastapi_mcp_ctx import Context, McpRouter, mcp_context

print("import-time noise on stdout")  # must not reach the JSON-RPC stream
_stdout_logger = logging.getLogger("stdio_app.stdout")
_stdout_logger.addHandler(logging.StreamHandler(sys.stdout))
_stdout_logger.setLevel(logging.INFO)
_stdout_logger.propagate = False

EVENTS: list[str] = []


def _mark(line: str) -> None:
    marker = os.environ.get("STDIO_TEST_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
    _mark("startup")
    yield {"pool": "pool-1"}
    _mark("shutdown")


def get_greeting() -> str:
    return "hello from the real dependency"


def get_db() -> Iterator[str]:
    EVENTS.append("db:open")
    try:
        yield "db"
    finally:
        EVENTS.append("db:close")


mcp_router = McpRouter()


@mcp_router.tool()
async def shout(text: str) -> str:
    """Upper-case text, writing noise to stdout in every way a tool can."""
    print("print() noise")
    sys.stdout.write("sys.stdout noise\n")
    sys.stdout.flush()
    os.write(1, b"fd 1 noise\n")
    _stdout_logger.info("logging-handler noise")
    subprocess.run(["echo", "child-process noise"], check=True)
    return text.upper()


@mcp_router.tool()
async def with_db(
    request: Request,
    db: str = Depends(get_db),
    greeting: str = Depends(get_greeting),
    x_author: str = Header(default="anonymous"),
    ctx: Context = Depends(mcp_context),
) -> dict[str, Any]:
    """Report what the dependencies and the synthetic request look like."""
    EVENTS.append("tool:with_db")
    return {
        "db": db,
        "greeting": greeting,
        "author": x_author,
        "client": list(request.client) if request.client else None,
        "method": request.method,
        "path": request.url.path,
        "app_is_app": request.app is app,
        "pool": request.state.pool,
        "body_method": (await request.json())["method"],
        "tenant": ctx.tenant_id,
        "era": ctx.era,
        "session_id": ctx.session_id,
        "auth": ctx.auth,
    }


@mcp_router.tool()
async def events() -> list[str]:
    """The events recorded so far in this server process."""
    return list(EVENTS)


@mcp_router.tool()
async def count(n: int, ctx: Context = Depends(mcp_context)) -> str:
    """Report progress and log at info on each step."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await ctx.log.info("counted", value=i)
    return f"counted to {n}"


@mcp_router.tool()
async def slow(seconds: float, label: str = "slow") -> str:
    """Sleep, recording whether the sleep was cancelled."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        EVENTS.append(f"{label}:cancelled")
        _mark(f"{label}:cancelled")
        raise
    return f"{label} done"


@mcp_router.tool()
def stubborn(seconds: float) -> str:
    """A sync tool that blocks its worker thread and cannot be cancelled."""
    time.sleep(seconds)
    return "woke up"


@mcp_router.tool()
async def later(tasks: BackgroundTasks) -> str:
    """Schedule a background task (it runs after the result is sent)."""
    tasks.add_task(EVENTS.append, "background")
    return "scheduled"


@mcp_router.tool()
async def remember(key: str, value: str, ctx: Context = Depends(mcp_context)) -> str | None:
    """Store a value in ctx.state and read it back."""
    await ctx.state.set(key, value)
    return await ctx.state.get(key)


@mcp_router.tool()
async def big(size: int) -> str:
    """A result of ``size`` non-ASCII characters (2 bytes each in UTF-8)."""
    return "é" * size


@mcp_router.tool()
def read_stdin() -> dict[str, str]:
    """Read stdin, and run a child process that inherits it: both must see no input."""
    own = sys.stdin.read()
    child = subprocess.run(["cat"], capture_output=True, timeout=5, check=True).stdout.decode()
    return {"own": own, "child": child}


@mcp_router.tool()
async def ask_client(method: str, params: dict[str, Any] | None = None, timeout: float = 5.0, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
    """Send one request to the client (ctx.send_request) and return its result."""
    return {"answer": await ctx.send_request(method, params, timeout=timeout)}


@mcp_router.tool()
async def whoami(x_author: str = Header(default="anonymous"), ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
    """The caller as the tools see it (MCP_AUTH_MODE=jwt over stdio: tests/test_stdio_headers.py)."""
    return {"tenant": ctx.tenant_id, "subject": ctx.auth.subject if ctx.auth is not None else None, "author": x_author}


app = FastAPI(lifespan=lifespan)
app.include_router(mcp_router)
app.dependency_overrides[get_greeting] = lambda: "overridden greeting"
