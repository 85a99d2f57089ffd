"""A call's cancellation flag: set when the client cancels (``notifications/cancelled``) or disconnects.

The transports create one :class:`CancelSignal` per call and hand it to the dispatcher
(``CallState.signal``); the handler reads it as ``ctx.signal``. Cancelling wakes every waiter
and cancels the handler's bound anyio scope. Spec 2025-11-25 ``basic/utilities/cancellation``;
2026-07-28 ``basic/patterns/cancellation``.
"""

from __future__ import annotations

import anyio

from .._bridge import bridged

__all__ = ["CancelSignal"]


class CancelSignal:
    """Cancellation of one call: set when the client cancels or disconnects.

    ``await signal.wait()`` returns once cancelled; ``signal.cancelled`` reads the flag;
    ``signal.reason`` is the client's reason (``notifications/cancelled``) or ``"disconnected"``.
    Spec 2025-11-25 ``basic/utilities/cancellation``; 2026-07-28 ``basic/patterns/cancellation``.
    """

    __slots__ = ("_event", "_scope", "reason")

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self.reason: str | None = None

    def bind(self, scope: anyio.CancelScope | None) -> None:
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

    @bridged("ctx.signal.wait", lambda _signal: None)  # no call of its own: an AnyIO worker thread runs it
    async def wait(self) -> None:
        """Block until the call is cancelled."""
        if self.reason is not None:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()

    def __bool__(self) -> bool:
        return self.cancelled
