"""A deadline for a block of asyncio code: ``asyncio.timeout_at``'s semantics at a fraction of its cost.

``asyncio.timeout`` builds a state machine and reschedules its timer on entry; on the session
store's hot path (a Redis session looked up on every request, under the request's store
deadline, by a driver task under its round trip's own bound) that was about 220 bytecodes a
request. :class:`Deadline` keeps the same contract with one timer and two slots:

- at ``at`` (the event loop's clock, seconds) the task running the block is cancelled natively;
- on leaving the block, that cancellation (and only it) becomes ``TimeoutError`` (``from`` the
  ``CancelledError``), with the same ``cancelling()`` / ``uncancel()`` accounting as asyncio's,
  so a cancellation from outside the block, or one made before it, still propagates;
- a block that ends before ``at`` leaves no timer behind;
- a block nested in another :class:`Deadline` of the same task that passes no later (a Redis
  round trip made under the request's store deadline) starts no timer of its own: the
  enclosing one fires first and its error is what the timer of the inner one, had it had one,
  would have let through (the inner block sees a cancellation it did not make and passes it on).

It must be entered and left by the same task, as ``asyncio.timeout`` must; it is not reusable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Final

__all__ = ["Deadline"]

_CANCELLED: Final = asyncio.CancelledError

_current_task = asyncio.current_task

_INNERMOST: dict[asyncio.Task[object], Deadline] = {}
"""Each task's innermost open :class:`Deadline` (an entry lives from a block's entry to its exit)."""


class Deadline:
    """``async with Deadline(at):`` (``at``: the running loop's ``time()``, seconds).

    ``error``, when given, makes the exception raised at expiry instead of ``TimeoutError`` (also
    for a ``TimeoutError`` of the block's own that ends it after ``at`` passed).

    Raises:
        TimeoutError: on leaving the block, when ``at`` passed inside it (``expired`` is then True).
        RuntimeError: entered outside a task.
    """

    __slots__ = ("_cancelling", "_error", "_handle", "_outer", "_task", "at", "expired")

    def __init__(self, at: float, error: Callable[[], Exception] | None = None) -> None:
        self.at = at
        self.expired = False
        self._error = error

    async def __aenter__(self) -> Deadline:
        task: asyncio.Task[object] | None = _current_task()
        if task is None:
            raise RuntimeError("Deadline must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        outer = self._outer = _INNERMOST.get(task)
        if outer is not None and outer.at <= self.at:
            self._handle = None  # the enclosing deadline's timer passes first (ties too: it started first)
        else:
            self._handle = task.get_loop().call_at(self.at, self._expire)
        _INNERMOST[task] = self
        return self

    def _expire(self) -> None:
        self.expired = True
        self._task.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._outer is None:
            del _INNERMOST[self._task]
        else:
            _INNERMOST[self._task] = self._outer
        if self._handle is not None:
            self._handle.cancel()
        if not self.expired:
            return
        if self._task.uncancel() <= self._cancelling and exc_type is _CANCELLED:
            raise (TimeoutError() if self._error is None else self._error()) from exc
        if self._error is not None and exc_type is TimeoutError:
            raise self._error() from exc
