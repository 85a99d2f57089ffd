"""One HTTP request's deadline for its session-store and bus work (``MCP_SESSION_STORE_DEADLINE_SECONDS``).

A request's store work before its handler runs (the replica bus subscription at first use, the
session lookup or creation, a client answer forwarded over the bus, a DELETE's teardown, a GET
stream's lease) may be several Redis round trips in sequence, each bounded only by the socket
timeout (and retried once by redis-py). A stalled Redis (``SIGSTOP``, ``DEBUG SLEEP``, a
saturated network) would make the request wait their sum. Here they share ONE deadline,
started by the first of them: whatever is still waiting when it passes is cancelled and the
request is answered 503 + ``Retry-After``
(:class:`~fastapi_mcp_ctx.errors.StateUnavailableError`, reason ``backend_unavailable``).

The deadline lives in the ASGI scope of the request (not in a context variable), so work a
request spawns (a call's background tasks, a stream's tail) never inherits it. In-process
(memory) stores never stall and are not bounded (no cost on their path).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

from ..backends._timeout import Deadline
from ..errors import StateUnavailableError

__all__ = ["DEADLINE_SCOPE_KEY", "StoreDeadline", "store_work"]

DEADLINE_SCOPE_KEY: Final = "fastapi_mcp_ctx.store_deadline"


class StoreDeadline:
    """The deadline of one request (``seconds`` after its first store operation)."""

    __slots__ = ("at", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = asyncio.get_running_loop().time() + seconds

    def bound(self) -> Deadline:
        """Run the body until the deadline at most: ``async with deadline.bound(): ...``
        (a fresh bound each time; one timer, see ``backends._timeout``).

        Raises:
            StateUnavailableError: the deadline passed first (HTTP 503, ``Retry-After: 1``).
        """
        return Deadline(self.at, self._unavailable)

    def _unavailable(self) -> StateUnavailableError:
        return StateUnavailableError(
            f"The session store (redis) did not answer within {self.seconds:g} s "
            "(MCP_SESSION_STORE_DEADLINE_SECONDS), retry later"
        )


_UNBOUNDED: Final = contextlib.nullcontext()


def store_work(scope: dict[str, Any] | Any, seconds: float, remote: bool) -> contextlib.AbstractAsyncContextManager[Any]:
    """The bound of a piece of a request's store work: the request's one deadline (made at its
    first use, kept in ``scope``) when the stores are ``remote`` (Redis), else nothing.

    Usage: ``async with store_work(request.scope, settings.session_store_deadline_seconds, remote): ...``
    """
    if not remote:
        return _UNBOUNDED
    deadline: StoreDeadline | None = scope.get(DEADLINE_SCOPE_KEY)
    if deadline is None:
        deadline = scope[DEADLINE_SCOPE_KEY] = StoreDeadline(seconds)
    return deadline.bound()
