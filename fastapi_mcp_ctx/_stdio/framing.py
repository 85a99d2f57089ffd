"""Bytes on the stdio file descriptors: newline framing, the reader thread and blocking writes.

:class:`LineFramer` cuts the input into lines of at most the body limit (a longer line is
skipped, never buffered); :func:`pump` is the daemon reader thread feeding chunks to the event
loop through a bounded number of slots; :func:`write_all` writes one batch. The session that
uses them is ``fastapi_mcp_ctx._stdio.session``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Final

__all__ = ["LineFramer", "pump", "write_all"]

_READ_CHUNK: Final = 64 * 1024


class LineFramer:
    """Splits a byte stream into lines of at most ``limit`` bytes (the newline excluded).

    :meth:`feed` returns the complete lines of a chunk, and ``None`` in place of a line that
    grew past ``limit`` (the rest of that line is skipped, never buffered); ``feed(b"")``
    marks the end of input and returns an unterminated last line.
    """

    __slots__ = ("_buffer", "_limit", "_skipping")

    def __init__(self, limit: int) -> None:
        self._buffer = bytearray()
        self._limit = limit
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        """The lines completed by ``chunk`` (``None``: a line over the limit)."""
        lines: list[bytes | None] = []
        if not chunk:
            if self._buffer and not self._skipping:
                lines.append(bytes(self._buffer))
            self._buffer.clear()
            self._skipping = False
            return lines
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if not self._skipping:
                self._buffer += chunk[start:end]
                if len(self._buffer) > self._limit:
                    self._buffer.clear()
                    self._skipping = True
                    lines.append(None)
            if newline < 0:
                return lines
            if self._skipping:
                self._skipping = False
            else:
                lines.append(bytes(self._buffer))
                self._buffer.clear()
            start = newline + 1


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (blocking; a writer thread calls it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def pump(fd: int, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes], slots: threading.Semaphore) -> None:
    """Reader thread: chunks of ``fd`` into ``queue``, then ``b""``; a chunk takes one of
    ``slots`` (released by the consumer), so at most that many chunks wait in memory."""
    while True:
        slots.acquire()
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except OSError:
            chunk = b""
        try:
            loop.call_soon_threadsafe(queue.put_nowait, chunk)
        except RuntimeError:  # the loop is closed: nobody reads any more
            return
        if not chunk:
            return
