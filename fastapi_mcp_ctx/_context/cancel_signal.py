"""A call's cancellation flag: set when the client cancels (``notifications/cancelled``) or disconnects.

The transports create one :class:`CancelSignal` per call and hand it to the dispatcher
(``CallState.signal``); the handler reads it as ``ctx.signal``. Cancelling wakes every waiter
and cancels the handler's bound anyio scope and the work a sync handler's threads run on the
call's loop (``_bridge``: the thread gets ``asyncio.CancelledError``). Spec 2025-11-25 ``basic/utilities/cancellation``;
2026-07-28 ``basic/patterns/cancellation``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from .._bridge import CallCancelled, Created, bridged
from .cancel_scope import HandlerScope

__all__ = ["CancelSignal"]


class CancelSignal:
    """Cancellation of one call: set when the client cancels or disconnects.

    ``await signal.wait()`` returns once cancelled; ``signal.cancelled`` reads the flag;
    ``signal.reason`` is the client's reason (``notifications/cancelled``) or ``"disconnected"``.
    Spec 2025-11-25 ``basic/utilities/cancellation``; 2026-07-28 ``basic/patterns/cancellation``.
    """

    __slots__ = ("_ended", "_event", "_scope", "_work", "loop", "reason")

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self._scope: HandlerScope | None = None
        self._work: set[asyncio.Task[Any]] | None = None
        self._ended = False
        self.reason: str | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        """The call's event loop (set when the call starts): ``wait`` from a thread runs there.
        The signal is its own ``_bridge.LoopOwner`` (no reference to the ``CallState``, which
        holds it: no cycle, so a call's objects are freed when it ends)."""

    @property
    def signal(self) -> CancelSignal:
        """Itself: what owns the work a thread runs on the loop (``_bridge.LoopOwner``)."""
        return self

    @property
    def created(self) -> list[Created] | None:
        """None: a ``wait()`` never awaited on the loop is not noted (``_bridge.LoopOwner``)."""
        return None

    @created.setter
    def created(self, value: list[Created] | None) -> None:
        pass

    def bind(self, scope: HandlerScope | None) -> None:
        """Cancel ``scope`` (the handler's) when this signal fires, at once when it already has;
        None unbinds."""
        self._scope = scope
        if scope is not None and self.reason is not None:
            scope.cancel()

    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled."""
        return self.reason is not None

    def cancel(self, reason: str) -> None:
        """Mark the call cancelled (first reason wins) and wake every waiter."""
        if self.reason is None:
            self.reason = reason
            if self._event is not None:
                self._event.set()
            if self._scope is not None:
                self._scope.cancel()
            self._cancel_work()

    def adopt(self, task: asyncio.Task[Any]) -> bool:
        """Cancel ``task`` (work a thread runs on the call's loop, ``_bridge``) when the call is
        cancelled or ends; False, and nothing kept, when it is cancelled already."""
        if self.reason is not None:
            return False
        work = self._work
        if work is None:
            work = self._work = set()
        work.add(task)
        task.add_done_callback(work.discard)
        return True

    def release(self) -> None:
        """The call ended: cancel its threads' work still running (a thread of the tool's own in
        ``ctx.signal.wait()`` gets ``asyncio.CancelledError``); work started later (a sync
        background task's ``ctx.log.info``) runs as before; a later ``wait()`` raises at once."""
        self._ended = True
        if self._event is not None:  # wake a waiter on the loop: it raises below
            self._event.set()
        if self._work:
            self._cancel_work()

    def _cancel_work(self) -> None:
        work, self._work = self._work, None
        for task in work or ():
            task.cancel()

    @bridged("ctx.signal.wait", lambda signal: signal)
    async def wait(self) -> None:
        """Block until the call is cancelled.

        Raises:
            CallCancelled: (an ``asyncio.CancelledError``) the call ended uncancelled, before or
                during the wait: nothing will cancel it any more, so no wait outlives its call.
        """
        if self.reason is not None:
            return
        if not self._ended:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        if self.reason is None:
            raise CallCancelled("the call ended without being cancelled")

    def __bool__(self) -> bool:
        return self.cancelled
