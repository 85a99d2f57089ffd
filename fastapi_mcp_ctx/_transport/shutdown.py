"""Graceful shutdown: learn that it began, end every open stream at once, bound in-flight calls.

An ASGI server stops by waiting for its open connections to finish before it runs the app's
lifespan shutdown, and it tells the app nothing in between (uvicorn: SIGTERM sets
``should_exit``, then ``Server.shutdown`` waits for connections, then for request tasks, then
runs the lifespan). A 2025 GET stream or a listen stream never finishes by itself, so without
help one idle client holds a rolling restart for as long as it stays connected.

:class:`ShutdownCoordinator` (one per router):

- **learning**: at the router's first request it chains a handler onto SIGTERM and SIGINT when
  the server installed its own there (uvicorn, gunicorn's uvicorn worker, hypercorn: any
  Python-level handler; ``SIG_DFL``, ``SIG_IGN`` and Python's default SIGINT handler are left
  alone). The chained handler schedules :meth:`begin` on the event loop, then calls the
  server's handler, so the server's own shutdown proceeds unchanged. Other servers (or an app
  that handles signals itself, ``MCP_SHUTDOWN_SIGNALS=false``) call ``mcp_router.begin_shutdown()``
  or ``await mcp_router.shutdown()``;
- **closing**: every open stream registered with :meth:`add_stream` (resumable 2025 connections,
  which end with a ``retry`` hint so the client resumes elsewhere; 2025 GET streams; 2026 listen
  streams, answered gracefully) is closed at once;
- **bounding**: calls still running (:meth:`track_call`) get ``grace_seconds`` to finish, then
  are cancelled with :data:`SHUTDOWN_REASON` (the dispatcher answers them with
  ``ServerShuttingDownError``, HTTP 503 + ``Retry-After``); running tasks are counted too;
- **waiting**: the router's lifespan shutdown awaits it (:meth:`at_exit`), since the server
  exits once no connection is open, whatever still runs in the background.

After :meth:`begin`, the router refuses new sessions and streams with 503 + ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from types import FrameType
from typing import Any, Final, Protocol

import anyio

from .._context.cancel_signal import CancelSignal

__all__ = ["SHUTDOWN_REASON", "Closer", "ShutdownCoordinator", "install_signal_hook"]

logger = logging.getLogger("fastapi_mcp_ctx")

SHUTDOWN_REASON: Final = "server shutting down"
"""``CancelSignal.reason`` of a call cancelled because the shutdown grace ran out."""

Closer = Callable[[], Awaitable[None]]
"""Ends one open stream promptly (a ``retry`` hint first where the era has one)."""


class Closable(Protocol):
    """An open stream held by :meth:`ShutdownCoordinator.hold_stream`: ``aclose()`` ends it
    promptly (a resumable 2025 call's response; hashed by identity)."""

    async def aclose(self) -> Any: ...

_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
_PREVIOUS: Final = "_fastapi_mcp_ctx_previous"
_CLOSE_SECONDS: Final = 5.0
_coordinators: weakref.WeakSet[ShutdownCoordinator] = weakref.WeakSet()


class ShutdownCoordinator:
    """See the module docstring.

    Args:
        grace_seconds: how long calls may still run once shutdown began (``MCP_SHUTDOWN_GRACE_SECONDS``).
        signals: chain SIGTERM/SIGINT handlers at first use (``MCP_SHUTDOWN_SIGNALS``).
    """

    def __init__(self, *, grace_seconds: float, signals: bool = True) -> None:
        self.grace_seconds = grace_seconds
        self._signals = signals
        self._streams: dict[int, Closer] = {}
        self._held: set[Closable] = set()
        self._groups: list[tuple[Closer, Callable[[], int]]] = []
        self._next = 0
        self._calls: set[CancelSignal] = set()
        self._calls_idle: anyio.Event | None = None
        self._begun = False
        self._deadline: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._requested = False
        self._done: anyio.Event | None = None

    @property
    def shutting_down(self) -> bool:
        """True once shutdown began."""
        return self._begun

    # -- learning ---------------------------------------------------------------------------
    def first_use(self) -> asyncio.AbstractEventLoop | None:
        """Called on every request: remembers the event loop and, once per loop, installs the
        signal hook (a few attribute reads when done). Returns the running asyncio loop (None off
        asyncio), which the endpoint keeps for the request (``_context.event_loop``)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        if loop is self._loop:
            return loop
        self._loop = loop
        if self._signals:
            install_signal_hook(self)
        return loop

    def _on_signal(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.begin)

    # -- registry ---------------------------------------------------------------------------
    def add_stream(self, close: Closer) -> Callable[[], None]:
        """Register an open stream; ``close`` runs when shutdown begins (at once when it has).

        Returns:
            ``remove``, to call once the stream ended.
        """
        token = self._next
        self._next += 1
        self._streams[token] = close
        if self._begun:
            self._spawn(self._run_close(close))

        def remove() -> None:
            self._streams.pop(token, None)

        return remove

    def add_stream_group(self, close: Closer, count: Callable[[], int]) -> None:
        """Register what closes a set of streams kept elsewhere (the notifier's listen and GET
        streams): ``close`` runs when shutdown begins (at once when it has); ``count()`` is how
        many of them are open, for the shutdown's log line. Registered for the coordinator's life."""
        self._groups.append((close, count))
        if self._begun:
            self._spawn(self._run_close(close))

    def hold_stream(self, stream: Closable) -> set[Closable]:
        """:meth:`add_stream` without a closure per stream (one per call of a resumable 2025
        client): ``stream.aclose()`` runs when shutdown begins (at once when it has).

        Returns:
            the set holding it: ``discard(stream)`` from it once the stream ended (no call back).
        """
        held = self._held
        held.add(stream)
        if self._begun:
            self._spawn(self._run_close(stream.aclose))
        return held

    def track_call(self, call_signal: CancelSignal) -> Callable[[], None]:
        """Count a running call; it is cancelled when the grace ran out (at once when it has).

        Returns:
            ``untrack``, to call once the call ended.
        """
        self.call_started(call_signal)

        def untrack() -> None:
            self.call_ended(call_signal)

        return untrack

    def call_started(self, call_signal: CancelSignal) -> None:
        """:meth:`track_call` without the ``untrack`` closure (the dispatcher's per-call form):
        call :meth:`call_ended` with the same signal once the call ended."""
        self._calls.add(call_signal)
        if self._deadline is not None and anyio.current_time() >= self._deadline:
            call_signal.cancel(SHUTDOWN_REASON)

    def call_ended(self, call_signal: CancelSignal) -> None:
        """The call counted by :meth:`call_started` ended."""
        self._calls.discard(call_signal)
        if not self._calls and self._calls_idle is not None:
            self._calls_idle.set()

    # -- shutting down ----------------------------------------------------------------------
    def begin(self) -> None:
        """Start shutting down in the background (idempotent; call it on the event loop)."""
        if self._begun or self._requested:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self.begin)
            return
        self._requested = True
        self._spawn(self.shutdown())

    async def shutdown(self) -> None:
        """Shut down and return once it is done: every registered stream closed, every tracked
        call finished or (after ``grace_seconds``) cancelled. Idempotent; concurrent callers
        wait for the same work."""
        if self._begun:
            if self._done is not None:
                await self._done.wait()
            return
        self._begun = True
        self._done = anyio.Event()
        self._deadline = anyio.current_time() + self.grace_seconds
        streams = len(self._streams) + len(self._held) + sum(count() for _, count in self._groups)
        logger.info("MCP shutdown begun: closing %d open stream(s); %d call(s) get %.1f s", streams, len(self._calls), self.grace_seconds)
        try:
            async with anyio.create_task_group() as tg:
                for close in (*(close for close, _ in self._groups), *self._streams.values()):  # the notifier's first, as before
                    tg.start_soon(self._run_close, close)
                for stream in tuple(self._held):
                    tg.start_soon(self._run_close, stream.aclose)
                tg.start_soon(self._bound_calls)
        finally:
            self._done.set()

    def reopen(self) -> None:
        """The app's lifespan starts again after a shutdown that finished (one app object served
        twice in one process: a test suite's ``with TestClient(app)`` per test): serve again
        instead of answering 503. Nothing while a shutdown is still running or none happened."""
        if self._begun and self._done is not None and self._done.is_set():
            self._begun = self._requested = False
            self._deadline = None
            self._done = None

    async def at_exit(self) -> None:
        """The app's lifespan is ending (the server stops): finish the shutdown a signal began,
        or run one while calls or tasks still run, so they get ``grace_seconds`` and a task's
        end is written before the process exits (uvicorn exits at once when no connection is
        open). Nothing when neither (an app's lifespan may run again: tests)."""
        if self._begun or self._requested or self._calls:
            await self.shutdown()

    async def _bound_calls(self) -> None:
        if self._calls:
            self._calls_idle = anyio.Event()
            with anyio.move_on_after(self.grace_seconds):
                await self._calls_idle.wait()
        if self._calls:
            self._calls_idle = anyio.Event()
            for call_signal in tuple(self._calls):
                call_signal.cancel(SHUTDOWN_REASON)
            with anyio.move_on_after(_CLOSE_SECONDS):  # they answer 503 and unwind
                await self._calls_idle.wait()

    async def _run_close(self, close: Closer) -> None:
        try:
            with anyio.move_on_after(_CLOSE_SECONDS):
                await close()
        except Exception:
            logger.exception("closing a stream at shutdown failed")

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            task = asyncio.get_running_loop().create_task(work)
        except RuntimeError:  # no loop running: nothing is open to close
            work.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _chained(previous: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
    def handler(signum: int, frame: FrameType | None) -> Any:
        for coordinator in tuple(_coordinators):
            coordinator._on_signal()  # pyright: ignore[reportPrivateUsage]
        return previous(signum, frame)

    setattr(handler, _PREVIOUS, previous)
    return handler


def install_signal_hook(coordinator: ShutdownCoordinator) -> bool:
    """Let SIGTERM/SIGINT begin ``coordinator``'s shutdown, chaining the handlers installed now.

    Only in the main thread, and only over a Python-level handler a server installed
    (``SIG_DFL``, ``SIG_IGN``, ``default_int_handler`` stay as they are: there is no server
    shutdown to precede). Installed once per signal; every registered coordinator is told.

    Returns:
        True when a hook is in place for at least one signal.
    """
    _coordinators.add(coordinator)
    if threading.current_thread() is not threading.main_thread():
        return False
    hooked = False
    for sig in _SIGNALS:
        current = signal.getsignal(sig)
        if getattr(current, _PREVIOUS, None) is not None:
            hooked = True
            continue
        if not callable(current) or current is signal.default_int_handler:
            continue
        signal.signal(sig, _chained(current))
        hooked = True
    return hooked
