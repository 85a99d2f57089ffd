"""The Context's awaitable methods from any thread: run where they are called, never lost.

A sync tool or sync dependency runs in a worker thread (FastAPI's thread pool, as for a plain
``def`` path operation). There ``ctx.log.info("x")`` or ``ctx.state.set("k", 1)`` would only
make a coroutine nobody awaits: the log line, the write, the question would be lost. Every
awaitable member of the Context (``ctx.log.*``, ``ctx.state.*``, ``ctx.report_progress``,
``ctx.notify*``, ``ctx.send_request``, ``ctx.elicit`` / ``sample`` / ``list_roots``,
``ctx.consent.require``, ``ctx.close_*sse_stream``, ``ctx.signal.wait``) is wrapped by
:func:`bridged`:

- on the event loop's thread it returns the coroutine, as the ``async def`` did (about 4k
  instructions more per Context call, the wrapper and the note below; a call that uses no
  Context member pays nothing: bench/README.md);
- in a thread without a running loop (the sync tool's worker thread or any thread it started)
  it runs the coroutine on the call's event loop (captured when the call started,
  ``CallState.loop``) and blocks until it finished: it returns the result or raises the
  exception (``InputRequired`` included, so a 2026 question from a sync tool ends the round as
  from an async one);
- in a thread running another loop of its own it returns a coroutine that awaits it running on
  the call's loop (an ``async def`` that a sync tool runs with ``asyncio.run`` in a thread may
  ``await ctx.state.get("k")``).

The coroutine run for a thread belongs to the call (``CallState.signal.adopt``): cancelling the
call (``notifications/cancelled``, a disconnect, shutdown) or its end cancels it, and the thread
gets :class:`CallCancelled` (an ``asyncio.CancelledError``, so a ``BaseException`` as in an async
tool: let it propagate; the call's runner answers the cancelled call); once the call is
cancelled a Context call from a thread raises it without starting. A sync tool
blocked in ``ctx.elicit`` so frees its worker thread at once instead of after
``server_request_timeout_seconds``.

Outside a call (no captured loop, e.g. ``asyncio.run(ctx.log.info("x"))`` in a unit test) an
AnyIO worker thread still runs it through ``anyio.from_thread.run``; otherwise the coroutine is
returned as before.

On the loop each coroutine made is noted on the call (``CallState.created``); when the call
ends, :func:`report_unawaited` closes those that were never awaited (no Python
``RuntimeWarning`` then: one report, ours) and logs one WARNING naming the handler and each
call with its file and line.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import operator
import sys
from collections.abc import Callable, Coroutine
from types import CodeType, CoroutineType
from typing import Any, Final, Protocol, TypeVar, cast

import anyio.from_thread

__all__ = ["CallCancelled", "Created", "LoopOwner", "WorkOwner", "bridged", "report_unawaited", "unawaited"]

logger = logging.getLogger("fastapi_mcp_ctx")
F = TypeVar("F", bound=Callable[..., Any])

Created = tuple[str, "CoroutineType[Any, Any, Any]", CodeType, int]
"""A coroutine made on the loop: ``(label, coroutine, the caller's code, its instruction offset)``."""

_KEEP_AT_MOST: Final = 1024
"""Never-awaited coroutines kept for the report at most; beyond, Python's own warning reports them."""


_running_loop = asyncio._get_running_loop  # pyright: ignore[reportPrivateUsage] - asyncio's C fast path, no exception
_getframe = sys._getframe  # pyright: ignore[reportPrivateUsage] - the caller's line, for the report
_call_of: Callable[[Any], Any] = operator.attrgetter("_call")


class CallCancelled(asyncio.CancelledError):
    """Raised in a thread whose Context call was cut short because the MCP call was cancelled or
    ended (module docstring). An ``asyncio.CancelledError``: a sync handler re-raises it (no
    ``except Exception`` catches it); the call's runner tells it from an anyio cancellation."""


class WorkOwner(Protocol):
    """What owns the work a thread runs on the call's loop (``CancelSignal``)."""

    def adopt(self, task: asyncio.Task[Any]) -> bool:
        """Cancel ``task`` with the call; False when the call is cancelled already."""
        ...


class LoopOwner(Protocol):
    """What :func:`bridged` reads of the call a method belongs to (``CallState``)."""

    loop: asyncio.AbstractEventLoop | None
    created: list[Created] | None

    @property
    def signal(self) -> WorkOwner: ...


def _created(coro: CoroutineType[Any, Any, Any]) -> bool:
    """True while ``coro`` has neither started nor been closed (``inspect.CORO_CREATED``)."""
    return coro.cr_frame is not None and not coro.cr_running and not coro.cr_suspended


async def _await(coro: Coroutine[Any, Any, Any]) -> Any:
    return await coro


async def _owned(owner: LoopOwner, coro: Coroutine[Any, Any, Any]) -> Any:
    """Await ``coro`` on the call's loop as work of the call: its cancellation cancels it."""
    task = asyncio.current_task()
    if task is not None and not owner.signal.adopt(task):
        coro.close()  # the call is cancelled: the work does not start
        raise asyncio.CancelledError
    return await coro


_CUT_SHORT: Final = "the MCP call was cancelled or ended"


async def _on_loop(owner: LoopOwner, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    """Await, from another loop, ``coro`` running on the call's ``loop``."""
    future = asyncio.run_coroutine_threadsafe(_owned(owner, coro), loop)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if not future.cancelled():
            raise  # this loop's own task was cancelled
        raise CallCancelled(_CUT_SHORT) from None


def _off_loop(owner: LoopOwner | None, coro: CoroutineType[Any, Any, Any]) -> Any:
    """Run ``coro`` from a thread with no running loop (see the module docstring)."""
    loop = owner.loop if owner is not None else None
    if owner is not None and loop is not None and loop.is_running():
        try:
            return asyncio.run_coroutine_threadsafe(_owned(owner, coro), loop).result()
        except concurrent.futures.CancelledError:
            raise CallCancelled(_CUT_SHORT) from None
    try:
        return anyio.from_thread.run(_await, coro)
    except RuntimeError:
        if not _created(coro):
            raise  # the coroutine ran and raised it
    return coro  # no loop to run it on: the caller runs it (asyncio.run(...)), as before


def bridged(label: str, owner_of: Callable[[Any], LoopOwner | None] | None = None) -> Callable[[F], F]:
    """Wrap an ``async def`` method so a call from a worker thread runs it to completion
    (module docstring). ``label`` names it in reports (``"ctx.state.set"``); ``owner_of``
    finds the call from the instance (default: its ``_call`` attribute, which may be None).
    Type checkers keep seeing the ``async def`` signature."""
    find_owner: Callable[[Any], LoopOwner | None] = owner_of if owner_of is not None else _call_of

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            coro = method(self, *args, **kwargs)
            owner = find_owner(self)
            running = _running_loop()
            if running is None:
                return _off_loop(owner, coro)
            if owner is None:
                return coro
            loop = owner.loop
            if running is not loop and loop is not None and loop.is_running():  # a thread running a loop of its own
                return _on_loop(owner, loop, coro)
            # Noted for the never-awaited report. The last entry is the latest coroutine, replaced
            # by the next once it finished (a handler awaiting each call keeps one entry); one
            # that has not started stays (a suspect, checked again when the call ends).
            created = owner.created
            if created is None:
                frame = _getframe(1)
                owner.created = [(label, coro, frame.f_code, frame.f_lasti)]
            elif created[-1][1].cr_frame is None:
                frame = _getframe(1)
                created[-1] = (label, coro, frame.f_code, frame.f_lasti)
            elif len(created) < _KEEP_AT_MOST:
                frame = _getframe(1)
                created.append((label, coro, frame.f_code, frame.f_lasti))
            return coro

        return cast(F, call)

    return wrap


def _scheduled(coro: Coroutine[Any, Any, Any]) -> bool:
    """True when a task will run ``coro`` (``asyncio.create_task(ctx.log.info(...))`` not started yet)."""
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        return False
    return any(task.get_coro() is coro for task in tasks)


def unawaited(owner: LoopOwner) -> list[str]:
    """Close the coroutines ``owner``'s handler made and never awaited; one description each
    (``"ctx.log.info() at app.py:12"``). Clears the record."""
    created, owner.created = owner.created, None
    found: list[str] = []
    for label, coro, code, offset in created or ():
        if _created(coro) and not _scheduled(coro):
            coro.close()
            found.append(f"{label}() at {code.co_filename}:{_line(code, offset)}")
    return found


def _line(code: CodeType, offset: int) -> int | str:
    """The source line of the instruction at byte ``offset`` of ``code`` (``"?"`` when unknown)."""
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return line
    return "?"


def report_unawaited(owner: LoopOwner, handler: str, request_id: str | int) -> str | None:
    """Close and report the coroutines of :func:`unawaited`: one WARNING on the
    ``fastapi_mcp_ctx`` logger naming ``handler`` (``"tool 'add'"``), the request and each call;
    returns its text (None when every coroutine was awaited)."""
    found = unawaited(owner)
    if not found:
        return None
    text = (
        f"{handler} (request id {request_id!r}) never awaited {', '.join(found)}, so "
        f"{'it' if len(found) == 1 else 'each'} did nothing: write `await` before it in an async function "
        "(a plain def tool or dependency needs none: there the call runs to completion)"
    )
    logger.warning("%s", text)
    return text
