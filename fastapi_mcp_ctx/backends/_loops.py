"""One pool per running event loop, for backends whose connections cannot move between loops.

An asyncio connection (redis-py, asyncpg, aiosqlite) and the asyncio locks and queues of a
pool belong to the event loop that first used them: on another loop they fail with "attached
to a different loop", "bound to a different event loop" or "Event loop is closed". That
happens whenever one process runs several loops one after another (``asyncio.run`` twice, a
test suite with one loop per test, Starlette's ``TestClient``) or side by side (threads).

So a backend keeps its pool in a :class:`PerLoop`: the pool is made, without I/O, on the
first call from each running loop, together with a *keeper* task on that loop. The keeper
runs the pool's background work (the SQL expiry sweep) and, when it is cancelled, closes the
pool on its own loop. ``asyncio.run``, ``asyncio.Runner``, ``anyio.run``, uvicorn and
pytest-asyncio cancel every pending task before they close a loop, so a pool left open when
its loop ends is still closed properly there. A loop closed without that (a bare
``loop.close()``) leaves its pool to the garbage collector; the next loop drops it.

:meth:`PerLoop.aclose` closes the running loop's pool and asks each other live loop,
thread-safely, to close its own; no code of one loop ever runs on another. The next call
makes a new pool, as the first call did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["OneLoop", "PerLoop"]

_R = TypeVar("_R")

logger = logging.getLogger(__name__)


class _Slot(Generic[_R]):
    """One loop's resource and its keeper task."""

    __slots__ = ("keeper", "keeper_closes", "loop", "value")

    def __init__(self, loop: asyncio.AbstractEventLoop, value: _R) -> None:
        self.loop = loop
        self.value = value
        self.keeper: asyncio.Task[None] | None = None
        self.keeper_closes = True  # False once aclose closes the value itself


class PerLoop(Generic[_R]):
    """A resource per running event loop: made by ``make`` on first use there, closed on that loop.

    Args:
        make: builds the resource for the running loop (no I/O; called inside that loop).
        close: releases a resource; always awaited on the resource's own loop.
        run: optional background work for a resource (e.g. a periodic sweep), run on its
            loop from its creation until it is closed; it should not return.
    """

    __slots__ = ("_close", "_make", "_run", "_slots")

    def __init__(
        self,
        make: Callable[[], _R],
        close: Callable[[_R], Awaitable[None]],
        run: Callable[[_R], Awaitable[None]] | None = None,
    ) -> None:
        self._make = make
        self._close = close
        self._run = run
        self._slots: dict[asyncio.AbstractEventLoop, _Slot[_R]] = {}

    def get(self) -> _R:
        """The running loop's resource, made now (with its keeper task) when this loop has none.

        Raises:
            RuntimeError: no event loop is running, or ``make`` refused.
        """
        loop = asyncio.get_running_loop()
        slot = self._slots.get(loop)
        if slot is None:
            slot = self._open(loop)
        return slot.value

    def _open(self, loop: asyncio.AbstractEventLoop) -> _Slot[_R]:
        for old in list(self._slots):  # list(): another thread's loop may add its own meanwhile
            if old.is_closed():  # closed without cancelling its tasks: nothing left to run there
                self._slots.pop(old, None)
        slot = _Slot(loop, self._make())
        slot.keeper = loop.create_task(self._keep(slot), name="fastapi-mcp-ctx backend pool keeper")
        self._slots[loop] = slot
        return slot

    async def _keep(self, slot: _Slot[_R]) -> None:
        try:
            if self._run is not None:
                await self._run(slot.value)
            await slot.loop.create_future()  # until the loop ends or aclose cancels this task
        finally:
            if self._slots.get(slot.loop) is slot:
                del self._slots[slot.loop]
            if slot.keeper_closes:
                try:
                    await self._close(slot.value)
                except Exception:  # the loop is ending: report, never raise into its shutdown
                    logger.warning("closing a state backend pool at the end of its event loop failed", exc_info=True)

    async def aclose(self) -> None:
        """Close the running loop's resource; ask every other live loop to close its own.

        Idempotent. The next :meth:`get` makes a new resource (reconnects lazily).
        """
        slots, self._slots = self._slots, {}
        mine = slots.pop(asyncio.get_running_loop(), None)
        for slot in slots.values():
            if slot.keeper is not None and not slot.loop.is_closed():
                with contextlib.suppress(RuntimeError):  # it closed meanwhile
                    slot.loop.call_soon_threadsafe(slot.keeper.cancel)
        if mine is not None:
            mine.keeper_closes = False
            if mine.keeper is not None:
                mine.keeper.cancel()
            await self._close(mine.value)


class OneLoop:
    """Guards an asyncio object the caller made (a client, an engine): it serves one event loop.

    Args:
        what: the object as the caller passed it (``"RedisBackend(client=...)"``).
        why: why it cannot move between loops.
        remedy: what to build instead when several loops share the backend.
    """

    __slots__ = ("_home", "_message")

    def __init__(self, what: str, why: str, remedy: str) -> None:
        self._home: asyncio.AbstractEventLoop | None = None
        self._message = f"{what} serves the event loop it was first used on, and this call runs on another one: {why}. {remedy}"

    def claim(self) -> None:
        """Bind to the running loop on first use; later, check that the running loop is that one.

        Raises:
            RuntimeError: called from another event loop (the message says what to build instead).
        """
        loop = asyncio.get_running_loop()
        if self._home is None:
            self._home = loop
        elif self._home is not loop:
            raise RuntimeError(self._message)
