"""A running task's server→client requests: they become the record's ``inputRequests``.

Inside a task there is no stream to the client: ``ctx.elicit``, ``ctx.sample``,
``ctx.list_roots``, ``ctx.request_input`` and consent ask through the one path of the input
rounds (``_context/asking.py``), which sends a live request on the call's back channel; a task's
back channel is a :class:`TaskChannel`. It writes the request under a fresh key into the record
(the task goes ``input_required``; spec 2026-07-28 tasks extension §Task Update Requests, and
2025-11-25 ``basic/utilities/tasks`` §Input Required Status), then waits until ``tasks/update``
(on any replica) recorded its answer: woken by the engine (a local update, or a relayed one), and
reading the record every lease period anyway, so a lost relay message costs at most that long.
Writing the question and reading its answer are run again while the store is unavailable (a
Redis restart: :class:`~.retry.StoreRetry`), for as long as the question may wait.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from .._context.call_state import CallState
from ..errors import NoBackChannelError, ServerRequestError, ServerRequestTimeoutError
from ..input_required import INPUT_METHODS
from .retry import StoreRetry

if TYPE_CHECKING:
    from .records import TaskStore

__all__ = ["TaskChannel"]

_KEY_PREFIX: Final = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}


class TaskChannel:
    """The ``ClientRequester`` of one running task (module docstring).

    Args:
        store / owner / task_id: where the task's record is.
        poll_seconds: the longest wait between two reads of the record.
        asked: called once a question is recorded (the engine publishes the status).
        retry: runs a store step again through an outage (the engine's).
    """

    def __init__(
        self,
        store: TaskStore,
        owner: str,
        task_id: str,
        poll_seconds: float,
        asked: Callable[[], Awaitable[None]] | None = None,
        retry: StoreRetry | None = None,
    ) -> None:
        self._store = store
        self._retry = retry if retry is not None else StoreRetry()
        self._on_ask = asked
        self._owner = owner
        self._task_id = task_id
        self._poll = poll_seconds
        self._asked = 0
        self.wake = asyncio.Event()
        """Set when an answer may have arrived (``tasks/update`` here, or relayed)."""

    async def send_request(self, call: CallState, method: str, params: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        """Ask ``method`` through the task's record and return the client's answer.

        Raises:
            NoBackChannelError: ``method`` is not one a task can ask (``ping``...), or the task ended.
            ServerRequestTimeoutError: no answer within ``timeout`` seconds.
            StateUnavailableError: the store stayed unavailable until then.
            ValueError: ``timeout`` is not a positive number.
        """
        if method not in INPUT_METHODS:
            raise NoBackChannelError(
                method, "a task asks the client only elicitation/create, sampling/createMessage or roots/list"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self._asked += 1
        key = f"{_KEY_PREFIX[method]}-{self._asked}"
        entry = json.dumps({"method": method, "params": params or {}}, separators=(",", ":"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        what = f"task {self._task_id[:8]}… asking {method}"
        if not await self._retry.run(lambda: self._store.ask(self._owner, self._task_id, key, entry), what, timeout):
            raise NoBackChannelError(method, "the task has ended")
        if self._on_ask is not None:  # input_required: listeners hear it (notifications/tasks)
            await self._on_ask()
        while True:
            self.wake.clear()  # before the read: an answer recorded after it sets it again
            answer = await self._retry.run(
                lambda: self._store.take(self._owner, self._task_id, key), what, max(deadline - loop.time(), 0.0)
            )
            if answer is not None:
                value: Any = json.loads(answer)
                if not isinstance(value, dict):
                    raise ServerRequestError(method, f"The client's answer to {method} is not an object")
                return value  # pyright: ignore[reportUnknownVariableType]
            left = deadline - loop.time()
            if left <= 0:
                raise ServerRequestTimeoutError(method, timeout)
            try:
                async with asyncio.timeout(min(left, self._poll)):
                    await self.wake.wait()
            except TimeoutError:
                pass
