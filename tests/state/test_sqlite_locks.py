"""SQLite lock conflicts: waited out or retried, never a spurious "unavailable".

Found by a CI run: 1,000 concurrent writers through three backends on one file got
``database is locked`` at once (SQLite answers some conflicts without waiting). Each
operation is one transaction, so the backend retries it for up to 30 s.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

from sqlalchemy.exc import OperationalError

from fastapi_mcp_ctx.backends._sql_engine import retry_when_locked as _retry_when_locked
from fastapi_mcp_ctx.backends.sql import SqlBackend
from fastapi_mcp_ctx.errors import StateUnavailableError


async def test_a_write_waits_for_another_process_holding_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    backend = SqlBackend(f"sqlite+aiosqlite:///{path}", create_tables=True)
    try:
        await backend.set("t/x/before", '"v"')
        holder = sqlite3.connect(path, check_same_thread=False)
        holder.execute("BEGIN EXCLUSIVE")
        threading.Timer(0.5, lambda: (holder.commit(), holder.close())).start()
        started = time.monotonic()
        await backend.set("t/x/during", '"w"')
        assert time.monotonic() - started >= 0.3
        assert await backend.get("t/x/during") == '"w"'
    finally:
        await backend.aclose()


async def test_an_immediate_busy_answer_is_retried(tmp_path: Path) -> None:
    backend = SqlBackend(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}", create_tables=True)
    calls = 0

    @_retry_when_locked
    async def flaky(self: SqlBackend) -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            cause = OperationalError("INSERT …", {}, Exception("database is locked"))
            raise StateUnavailableError("State backend (sql) unavailable, retry later") from cause
        return "done"

    try:
        assert await flaky(backend) == "done"
        assert calls == 3
    finally:
        await backend.aclose()


async def test_other_failures_are_not_retried(tmp_path: Path) -> None:
    backend = SqlBackend(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}", create_tables=True)
    calls = 0

    @_retry_when_locked
    async def broken(self: SqlBackend) -> str:
        nonlocal calls
        calls += 1
        raise StateUnavailableError("State backend (sql) unavailable, retry later") from OSError("disk gone")

    try:
        try:
            await asyncio.wait_for(broken(backend), 5)
        except StateUnavailableError:
            pass
        assert calls == 1
    finally:
        await backend.aclose()
