"""One ``resources/read`` / ``prompts/get`` / ``completion/complete`` made ready to run: :data:`Run` and
:class:`Invocation`, returned by ``_handlers/features.py`` and run by ``_server/call_prep.py`` the way
it runs ``tools/call``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi.background import BackgroundTasks
from starlette.requests import Request

from ..context import Context
from ..contracts import ErrorContracts

__all__ = ["Invocation", "Run"]

Run = Callable[[Context, Request, BackgroundTasks], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Invocation:
    """A checked ``resources/read`` / ``prompts/get`` / ``completion/complete``: ``run`` gives
    the result dict; ``operation`` / ``logger_name`` / ``uri`` feed the call's ``Context``;
    ``cacheable``: a 2026 result carries cache hints; ``private_scope``: the handler has
    dependencies (the call gets its own copy of the request scope); ``contracts``: the handler's
    declared error contracts (``CallState.contracts``: ``ctx.fail``)."""

    operation: str
    logger_name: str
    uri: str | None
    run: Run
    cacheable: bool
    private_scope: bool
    contracts: ErrorContracts | None = None
