"""Run an awaitable's first step now: its result when it needs no waiting, else the rest to await.

The body read (``_server.http.read_body``) guards its wait with a deadline timer; but the ASGI server
has usually received the whole body before the app runs, and its ``receive()`` then returns
without suspending, so the timer (8k instructions a request on asyncio) guards nothing. With
:func:`first_step` the read takes that answer at once and starts the deadline only when the
server must really wait for the client. Nothing is lost when it must: :class:`Rest` hands the
step's pending future to the awaiting task unchanged, and forwards what the task sends or
throws (a cancellation included), exactly as ``await`` would have.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from typing import Any, Generic, TypeVar

__all__ = ["Rest", "first_step"]

T = TypeVar("T")


class Rest(Generic[T]):
    """The remainder of an awaitable whose first step suspended on ``pending``; await it once."""

    __slots__ = ("_pending", "_steps")

    def __init__(self, steps: Generator[Any, Any, T], pending: Any) -> None:
        self._steps = steps
        self._pending = pending

    def __await__(self) -> Generator[Any, Any, T]:
        steps, pending = self._steps, self._pending
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                _close(steps)
                raise
            except BaseException as exc:  # noqa: BLE001 - delivered into the awaitable, as await does
                throw: Any = getattr(steps, "throw", None)
                if throw is None:  # a plain iterator (``yield from`` raises here too)
                    _close(steps)
                    raise
                try:
                    pending = throw(exc)
                except StopIteration as done:
                    return done.value  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]
            else:
                try:
                    pending = _advance(steps, sent)
                except StopIteration as done:
                    return done.value  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]

    def close(self) -> None:
        """Abandon the awaitable (it is closed as if its awaiting task had been)."""
        _close(self._steps)


def _advance(steps: Any, value: Any) -> Any:
    """One step with ``value`` sent, as ``yield from`` does: ``__next__`` for None (all an
    awaitable's iterator must have: Granian's ``receive()`` gives no ``send``), else ``send``."""
    return next(steps) if value is None else steps.send(value)


def _close(steps: Any) -> None:
    close: Any = getattr(steps, "close", None)
    if close is not None:
        close()


def first_step(awaitable: Awaitable[T]) -> tuple[T, None] | tuple[None, Rest[T]]:
    """``(result, None)`` when ``awaitable`` finished without suspending, else ``(None, rest)``:
    ``await rest`` (once, in the same task) for the result. Exceptions of the first step propagate."""
    steps: Generator[Any, Any, T] = awaitable.__await__()  # any iterator: a coroutine's, or a server's own awaitable
    try:
        pending = next(steps)
    except StopIteration as done:
        return done.value, None  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]
    return None, Rest(steps, pending)
