"""The replicated example app plus ``counted``, a tool that appends its token to the file named
by ``FAILOVER_COUNT_FILE`` (one line per execution, on any replica): the failover tests count
how often each acknowledged call ran."""

from __future__ import annotations

import os

from examples.replicated_app import app, mcp_router

__all__ = ["app"]


@mcp_router.tool()
async def counted(token: str) -> str:
    """Record one execution of the call named ``token``; answer it."""
    with open(os.environ["FAILOVER_COUNT_FILE"], "a", encoding="utf-8") as out:  # noqa: ASYNC230 - one short append
        out.write(token + "\n")
    return token
