"""The POST connection of a resumable 2025 call once its stream started: the call's stream's
:class:`~._transport.sse.Attached` connection (a base class of
:class:`~._transport.resumable_call.ResumableCallResponse`, which runs the call and stores its events).

- frames are written while the connection is open; a failed write (the client is gone) closes it,
  and the call goes on, its events stored for a resume;
- it is dropped, writing nothing more, when the client disconnects (a watcher task started
  :data:`WATCH_AFTER` seconds into the stream), a resume (``GET`` + ``Last-Event-ID``) takes the
  stream over, or the session ends (then its body is ended at once);
- its body is ended once, which detaches it from its stream and stops its watcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Final, Literal

import anyio
from starlette.types import Receive, Send

from .event_ids import StreamKey
from .sse import End

__all__ = ["WATCH_AFTER", "CallConnection"]

WATCH_AFTER: Final = 0.05
"""Seconds a stream runs before a task watches for the client's disconnect (most never need one:
uvicorn drops writes to a gone client, and the call goes on either way)."""


class CallConnection:
    """The connection half of a resumable call's response: what its stream's ``Attached`` is
    asked (``key``, ``kind``, ``reason``, ``drop``, ``wait_finished``; ``aclose`` is the call's,
    it may start the stream). The response starts the stream and sets the attributes below then;
    until it does they keep their class defaults (a plain JSON answer never changes them)."""

    _lock: anyio.Lock | None = None
    _stream_key: StreamKey | None = None
    _open = False  # the connection still takes frames
    _finished: anyio.Event | None = None
    _detach: Callable[[], None] | None = None
    _send: Send | None = None
    _receive: Receive | None = None
    _tasks: set[asyncio.Task[None]] | None = None
    _watch_later: asyncio.TimerHandle | None = None
    reason: End | None = None

    @property
    def kind(self) -> Literal["post", "get"]:
        """A call's own response (an :class:`~._transport.sse.Attached`)."""
        return "post"

    @property
    def key(self) -> StreamKey:
        """The call's stream (once it started)."""
        assert self._stream_key is not None
        return self._stream_key

    def _guard(self) -> anyio.Lock:
        if self._lock is None:
            self._lock = anyio.Lock(fast_acquire=True)  # no checkpoint when nobody else holds it
        return self._lock

    async def _write(self, body: bytes, *, more: bool = True) -> None:
        if not self._open:
            return
        send = self._send
        assert send is not None
        self._open = more
        try:
            await send({"type": "http.response.body", "body": body, "more_body": more})
        except Exception:  # noqa: BLE001 - the client is gone; nothing more is written to it
            self._open = False

    async def _end(self, body: bytes = b"") -> None:
        """End the response body (once); the connection is detached from its stream."""
        if self._finished is None or self._finished.is_set():
            return
        was_open, self._open = self._open, True
        if was_open or self.reason in ("replaced", "dropped"):
            await self._write(body, more=False)
        self._open = False
        self._finished.set()
        if self._detach is not None:
            self._detach()
        if self._watch_later is not None:
            self._watch_later.cancel()
        for task in tuple(self._tasks or ()):
            if task is not asyncio.current_task():
                task.cancel()  # the disconnect watcher

    def drop(self, reason: End) -> None:
        """Write nothing more: the client went away, a resume took the stream over, or the
        session ended (then the body is ended at once)."""
        if self.reason is None or self.reason == "closed":
            self.reason = reason
        was_open, self._open = self._open, False
        if was_open and reason != "gone":
            self._spawn(self._end_now())

    async def _end_now(self) -> None:
        async with self._guard():
            await self._end()

    async def _watch(self) -> None:
        receive = self._receive
        assert receive is not None
        while (await receive())["type"] != "http.disconnect":
            pass
        if self._finished is not None and not self._finished.is_set():
            self.drop("gone")  # the call goes on; its events are stored for a resume

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        tasks = self._tasks
        if tasks is None:
            tasks = self._tasks = set()
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def wait_finished(self) -> None:
        """Return once the response body has ended."""
        if self._finished is not None:
            await self._finished.wait()
