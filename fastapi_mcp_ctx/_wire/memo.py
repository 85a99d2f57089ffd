"""Answers remembered for the header values every request of a client repeats.

A client sends the same ``Accept``, names the same few tools in ``Mcp-Name``: parsing them
once per distinct value keeps that work off the hot path. The memo is bounded in entries and
in key length, stops adding once full (no eviction: nothing for a client to churn), and never
stores a computation that raised, so a refused value is judged again every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["BoundedMemo", "HeaderNames"]

V = TypeVar("V")


class BoundedMemo(Generic[V]):
    """``compute(key)`` remembered for at most ``size`` keys of at most ``max_key_chars`` characters."""

    __slots__ = ("_answers", "_max_key_chars", "_size")

    def __init__(self, size: int, *, max_key_chars: int = 256) -> None:
        self._answers: dict[str, V] = {}
        self._size = size
        self._max_key_chars = max_key_chars

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str, compute: Callable[[str], V]) -> V:
        """The remembered answer for ``key``, else ``compute(key)`` (remembered while there is room).

        Raises:
            whatever ``compute`` raises (nothing is remembered then).
        """
        known = self._answers.get(key)
        if known is not None:
            return known
        value = compute(key)
        if len(self._answers) < self._size and len(key) <= self._max_key_chars:
            self._answers[key] = value
        return value


class HeaderNames(dict[bytes, str]):
    """Raw header names (ASGI bytes) → their lower-cased latin-1 text, remembered for at most
    ``size`` names of at most 64 bytes: ``names[raw]`` is one C dict look-up for a name seen
    before, the decoded, lower-cased and already hashed string (a request's headers are the same
    few names every time); an unseen name is decoded here (:meth:`__missing__`)."""

    __slots__ = ("_size",)

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size

    def __missing__(self, raw: bytes) -> str:
        name = raw.decode("latin-1").lower()
        if len(self) < self._size and len(raw) <= 64:
            self[raw] = name
        return name
