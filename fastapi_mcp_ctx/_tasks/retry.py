"""A running task's own store steps through a store outage: run again, with backoff, bounded.

A task's record lives in the store (Redis) for its whole run. A step of the running replica on
it (``ask``, ``take``, ``finish``: idempotent, ``records.TaskStore``) that meets
:class:`~fastapi_mcp_ctx.errors.StateUnavailableError` (Redis restarting, a failover, a
partition) is run again after a wait doubling from ``first`` to ``cap`` seconds, until its
budget of seconds is spent; then the last error is raised. Logged: one WARNING at the first
failure, one INFO once the step went through, one ERROR when it gave up.

:class:`StoreRetry` holds the clock and the sleep (tests give controlled ones).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..errors import StateUnavailableError

__all__ = ["StoreRetry"]

logger = logging.getLogger("fastapi_mcp_ctx")
T = TypeVar("T")


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


@dataclass(slots=True)
class StoreRetry:
    """Runs a task's store step again while the store is unavailable (module docstring).

    Attributes:
        sleep: ``await sleep(seconds)`` between two attempts.
        clock: now, in seconds (the budget's clock; default the event loop's).
        first / cap: the first wait and the longest one (seconds).
    """

    sleep: Callable[[float], Awaitable[object]] = field(default=asyncio.sleep)
    clock: Callable[[], float] = field(default=_loop_time)
    first: float = 0.1
    cap: float = 2.0

    async def run(self, step: Callable[[], Awaitable[T]], what: str, seconds: float) -> T:
        """``await step()``, run again while it raises ``StateUnavailableError`` for at most
        ``seconds`` (then that error is raised). ``what`` names the step in the log."""
        deadline = self.clock() + seconds
        delay, failures = self.first, 0
        while True:
            try:
                value = await step()
            except StateUnavailableError as exc:
                failures += 1
                left = deadline - self.clock()
                if left <= 0:
                    logger.error("%s: the task store stayed unavailable (%d attempt(s)), giving up: %s", what, failures, exc.message)
                    raise
                if failures == 1:
                    logger.warning("%s: the task store is unavailable, trying again for up to %.1f s: %s", what, left, exc.message)
                await self.sleep(min(delay, left))
                delay = min(delay * 2, self.cap)
                continue
            if failures:
                logger.info("%s: done after %d failed attempt(s)", what, failures)
            return value
