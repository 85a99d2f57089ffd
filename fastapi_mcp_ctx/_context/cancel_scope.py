"""A handler call's cancel scope: free until the call is cancelled, anyio-correct when it is.

``anyio.CancelScope`` costs about 24k instructions a call on asyncio (sniffio's backend lookup,
the task's ``TaskState`` in a weak dictionary, parent and child sets, the checks on exit), paid
by every call though almost none is ever cancelled. :class:`CallScope` records the task it runs
in and nothing else; the work happens only when :meth:`CallScope.cancel` is called (a client's
``notifications/cancelled``, a disconnect, the shutdown grace):

- the task is cancelled natively (``Task.cancel``), the way ``asyncio.timeout`` does it, with a
  message anyio never takes for its own, so every anyio scope the handler opened lets it
  through, and a task group the handler waits on cancels its children as anyio does;
- while the handler is inside a *shielded* anyio scope (``anyio.to_thread.run_sync`` without
  ``abandon_on_cancel``, ``CancelScope(shield=True)``), delivery waits until the shield is gone
  (checked every ``RETRY_SECONDS``): a shield holds against this scope as against anyio's own;
- a cancel made from inside the task itself is delivered at its next suspension, never as a
  pending cancellation that would outlive the scope;
- on exit the scope swallows its own ``CancelledError`` (``cancelled_caught``) and takes its
  request back (``Task.uncancel``), so a native cancellation from elsewhere (the server's, an
  outer task group's) still propagates.

The one difference from anyio's scope: the cancellation is delivered once (edge, as asyncio's
own), not again at every later ``await`` of a handler that caught it and went on.

Off plain asyncio (trio, a library that set sniffio's context) :func:`new_cancel_scope` returns
``anyio.CancelScope()`` itself. Spec 2025-11-25 ``basic/utilities/cancellation``; 2026-07-28
``basic/patterns/cancellation``.
"""

from __future__ import annotations

import asyncio
import sys
from types import TracebackType
from typing import Any, Final, Protocol

import anyio

try:  # sniffio decides what anyio sees; it is optional in recent anyio releases
    from sniffio import current_async_library_cvar as _library_cvar
    from sniffio import thread_local as _library_thread
except ImportError:  # pragma: no cover - without sniffio anyio assumes asyncio too
    _library_cvar = None
    _library_thread = None

__all__ = ["RETRY_SECONDS", "CallScope", "HandlerScope", "new_cancel_scope"]

RETRY_SECONDS: Final = 0.005
"""How often a cancellation held by a shielded anyio scope is tried again (seconds)."""

_MESSAGE: Final = "fastapi_mcp_ctx: the call was cancelled"
"""The ``CancelledError``'s message: not anyio's ("Cancelled via cancel scope …"), so no anyio
scope of the handler's swallows it."""

_current_task = asyncio.current_task


class HandlerScope(Protocol):
    """What the transports and :class:`~fastapi_mcp_ctx._context.cancel_signal.CancelSignal` use of a
    handler's scope (a :class:`CallScope` or an ``anyio.CancelScope``)."""

    def cancel(self) -> None: ...

    @property
    def cancelled_caught(self) -> bool: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None, /
    ) -> bool | None: ...


_anyio_task_states: Any = None
"""anyio's ``_task_states`` (the scopes each task is in), once its asyncio backend is imported:
before that no anyio scope exists anywhere."""


def _anyio_scope_of(task: asyncio.Task[Any]) -> Any:
    """The anyio cancel scope ``task`` is in now, or None."""
    global _anyio_task_states
    states = _anyio_task_states
    if states is None:
        backend = sys.modules.get("anyio._backends._asyncio")
        if backend is None:
            return None
        states = _anyio_task_states = getattr(backend, "_task_states")  # noqa: B009 - private to anyio: tests/test_call_scope.py guards it
    state = states.get(task)
    return state.cancel_scope if state is not None else None


class CallScope:
    """One handler call's cancel scope on asyncio (module docstring): ``with CallScope():`` in the
    task that runs the handler; :meth:`cancel` from anywhere on the loop."""

    __slots__ = ("_cancel_called", "_cancelling", "_handle", "_home", "_issued", "_outer", "_task", "cancelled_caught")

    def __init__(self, task: asyncio.Task[Any] | None = None) -> None:
        """``task``: the task that enters the scope, when the caller knows it already
        (:func:`new_cancel_scope`); else it is looked up on entry."""
        self._home = task
        self._task: asyncio.Task[Any] | None = None
        self._cancel_called = False
        self._issued = False
        self._handle: asyncio.Handle | None = None
        self.cancelled_caught = False
        """True when the scope ended its call by cancelling it (its own ``CancelledError`` caught)."""

    def __enter__(self) -> CallScope:
        task = self._home or _current_task()
        if task is None:
            raise RuntimeError("CallScope needs a running asyncio task")
        self._task = task
        self._cancelling = task.cancelling()
        self._outer = _anyio_scope_of(task)  # the anyio scopes around the call are not its own
        if self._cancel_called:
            self._schedule(0.0)
        return self

    def cancel(self) -> None:
        """Cancel the call: delivered now, or once no shielded anyio scope holds the handler."""
        if self._cancel_called:
            return
        self._cancel_called = True
        if self._task is not None:
            if self._task is _current_task():  # from inside the call: at its next suspension
                self._schedule(0.0)
            else:
                self._deliver()

    def _schedule(self, delay: float) -> None:
        task = self._task
        if task is not None and self._handle is None:
            self._handle = task.get_loop().call_later(delay, self._deliver)

    def _deliver(self) -> None:
        self._handle = None
        task = self._task
        if task is None or self._issued or task.done():
            return
        if self._shielded(task):
            self._schedule(RETRY_SECONDS)
            return
        self._issued = True
        task.cancel(_MESSAGE)

    def _shielded(self, task: asyncio.Task[Any]) -> bool:
        """True when ``task`` is inside a shielded anyio scope the handler opened."""
        scope = _anyio_scope_of(task)
        outer = self._outer
        while scope is not None and scope is not outer:
            if scope._shield:  # noqa: SLF001 - anyio's own flag, read only
                return True
            scope = scope._parent_scope  # noqa: SLF001
        return False

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        task, self._task = self._task, None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._issued or task is None:
            return False
        task.uncancel()  # this scope's request, delivered or swallowed by the handler
        if isinstance(exc, asyncio.CancelledError) and task.cancelling() <= self._cancelling:
            self.cancelled_caught = True
            return True
        return False


def _plain_asyncio_task(loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Task[Any] | None:
    """The running asyncio task when sniffio would answer ``"asyncio"`` (no override, an asyncio
    task runs), else None; ``loop``: the running loop when the caller knows it (no look-up)."""
    if _library_cvar is not None and (_library_cvar.get() is not None or _library_thread.name is not None):  # pyright: ignore[reportOptionalMemberAccess]
        return None
    try:
        return _current_task(loop)
    except RuntimeError:
        return None


def new_cancel_scope(loop: asyncio.AbstractEventLoop | None = None) -> HandlerScope:
    """A handler call's scope, to enter at once in the calling task: a :class:`CallScope` on plain
    asyncio (told its task, so entering it looks up nothing), else ``anyio.CancelScope()``.
    ``loop``: the running loop, when the caller has it (``_context.event_loop.scope_loop``)."""
    task = _plain_asyncio_task(loop)
    if task is not None:
        return CallScope(task)
    return anyio.CancelScope()
