"""The task engine: creation, the background run and its lease, cancel and update, shutdown.

One per router (``McpRouter.tasks``), for both eras (``wire.py`` shapes its answers):

- **creation**: the record is written (:meth:`TaskEngine.create`) before the ``tools/call`` is
  answered, so a ``tasks/get`` right after it resolves on any replica (SEP-2663 §Task Creation);
  refused while the server shuts down (503) and beyond ``MCP_MAX_TASKS_PER_OWNER``;
- **the run** (:meth:`TaskEngine.run`): the call's prepared runner (the same one a plain call
  runs: its dependencies, input rounds, shaping, error mapping) runs in a background task of this
  replica, its notifications dropped (spec: no progress or log messages for tasks), its questions
  going through :class:`~.channel.TaskChannel`. Its reply becomes the record's end: a result
  (``isError`` included) ``completed``, a JSON-RPC error ``failed``, a cancelled call
  ``cancelled``, the shutdown grace ran out ``failed`` (``reason: server_shut_down``), a result
  larger than ``MCP_TASK_MAX_RESULT_BYTES`` ``failed`` (``task_result_too_large``);
- **the lease**: the running replica renews it every third of ``MCP_TASK_LEASE_SECONDS`` (sooner
  again after a failed renewal); a task whose replica died reads ``failed`` (``task_lost``) from
  any replica once it lapses (readers lapse it; the runner's own steps never do, so an outage
  longer than the lease does not lose a live task); a renewal finding the task ended (cancelled
  elsewhere) cancels the handler;
- **outages**: the end of the run is written again while the store is unavailable (until the
  task's TTL, at most :data:`FINISH_RETRY_SECONDS`), a question's steps for as long as it may
  wait (:mod:`.retry`); nothing is left as an unretrieved exception;
- **relay**: ``tasks/cancel`` and ``tasks/update`` change the record where they arrive, then
  tell the replicas (``{"k": "task", "t": <id>, "op": "cancel" | "wake"}`` on the ``replicas``
  channel, :mod:`.._replicas.relay`); the one running the task cancels its handler or wakes
  its waiting question. A lost message costs at most one lease period (the renewal and the
  question's own polling read the record).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from starlette.background import BackgroundTasks

from .._bridge import bridged
from .._context.call_state import CallState
from .._context.cancel_scope import new_cancel_scope
from .._context.cancel_signal import CancelSignal
from .._transport.shutdown import SHUTDOWN_REASON, ShutdownCoordinator
from .._transport.streams import Outbound, Reply, Runner, run_background
from ..errors import ServerShuttingDownError, TaskFailedError, TaskNotFoundError
from ..settings import McpSettings
from .channel import TaskChannel
from .records import TaskRecord, TaskStatus, TaskStore
from .retry import StoreRetry
from .wire import detailed_params, task_outcome

__all__ = ["FINISH_RETRY_SECONDS", "TaskEngine", "TaskHandle", "TaskStart"]

logger = logging.getLogger("fastapi_mcp_ctx")

TaskStart = Literal["call", "handler"]
CANCELLED_BY_CLIENT: Final = "cancelled by the client (tasks/cancel)"
FINISH_RETRY_SECONDS: Final = 3600.0
"""The longest a task's end is written again while the store is unavailable (else until its TTL)."""

Publish = Callable[[dict[str, Any]], Awaitable[None]]
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
"""``(owner, DetailedTask params)``: publish a task's ``notifications/tasks`` (``Notifier.task_changed``)."""


async def _drop(message: dict[str, Any]) -> None:
    """A task's outbound: progress and log notifications are not sent for tasks (SEP-2663)."""


@dataclass(slots=True)
class TaskHandle:
    """``ctx.task``: the task this call runs as.

    Attributes:
        task_id: the ``taskId`` the client polls.
    """

    task_id: str
    _engine: TaskEngine
    _owner: str
    _call: CallState
    """The call running as the task: a sync tool's ``ctx.task.status(...)`` runs on its loop (``_bridge``)."""

    @bridged("ctx.task.status")
    async def status(self, message: str) -> None:
        """Publish ``message`` as the task's ``statusMessage`` (read by ``tasks/get`` on any replica);
        from a sync ``def`` tool it runs to completion without ``await`` (as every Context call).

        Raises:
            TypeError: ``message`` is not a str. StateUnavailableError: the store is down.
        """
        if not isinstance(message, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"a task status message must be a str, not {type(message).__name__}")
        await self._engine.store.renew(self._owner, self.task_id, self._engine.lease_ms, message[:1024])


@dataclass(slots=True)
class _Running:
    owner: str
    signal: CancelSignal
    channel: TaskChannel
    expires_ms: int
    keeper: asyncio.Task[None] | None = None


class TaskEngine:
    """The tasks of one router (module docstring).

    Args:
        store: the records (memory or Redis, chosen like the session store).
        settings: ``task_*`` settings.
        shutdown: the router's coordinator: no task starts once it began; running ones get the grace.
        publish: broadcast to the other replicas (``Relay.forward_task``), or None (one process).
        notify: publish a status change to listen streams (``Notifier.task_changed``), or None.
    """

    def __init__(
        self,
        store: TaskStore,
        settings: McpSettings,
        shutdown: ShutdownCoordinator | None = None,
        publish: Publish | None = None,
        notify: Notify | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.shutdown = shutdown
        self.publish = publish
        self.notify = notify
        self.lease_ms = int(settings.task_lease_seconds * 1000)
        self._running: dict[str, _Running] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.retry = StoreRetry()
        """How the runner's store steps are run again through an outage (tests: a controlled clock)."""
        self.lease_sleep: Callable[[float], Awaitable[object]] = asyncio.sleep
        """The lease keeper's wait between two renewals (tests: a controlled one)."""

    # -- reading and changing a record (any replica) -------------------------------------
    async def get(self, owner: str, task_id: Any) -> TaskRecord:
        """The caller's task ``task_id``; :class:`TaskNotFoundError` (-32602) for an unknown,
        expired or another owner's one, or an id that is not a non-empty string."""
        if not isinstance(task_id, str) or not task_id:
            raise TaskNotFoundError("tasks/* requires a string 'taskId'", reason="invalid_params")
        record = await self.store.get(owner, task_id)
        if record is None:
            raise TaskNotFoundError(data={"taskId": task_id[:256]})
        return record

    async def cancel(self, owner: str, task_id: Any) -> TaskRecord:
        """Cancel the caller's task (idempotent on a terminal one) and stop its handler wherever
        it runs; returns the record after. Raises :class:`TaskNotFoundError`."""
        record = await self.get(owner, task_id)
        if not record.terminal and await self.store.cancel(owner, record.task_id):
            await self._tell(record.task_id, "cancel")
            record = await self.get(owner, task_id)
            await self.changed(owner, record)
        return record

    async def update(self, owner: str, task_id: Any, responses: Mapping[str, Any]) -> list[str]:
        """Record answers to the task's pending input requests (unknown or answered keys are
        ignored) and wake its question; returns the keys taken. Raises :class:`TaskNotFoundError`."""
        record = await self.get(owner, task_id)
        encoded = {key: json.dumps(value, separators=(",", ":")) for key, value in responses.items() if isinstance(value, dict)}
        taken = await self.store.answer(owner, record.task_id, encoded) if encoded else []
        if taken is None:
            raise TaskNotFoundError(data={"taskId": record.task_id[:256]})
        if taken:
            await self._tell(record.task_id, "wake")
            await self.changed(owner, record.task_id)
        return taken

    async def changed(self, owner: str, task: TaskRecord | str) -> None:
        """Publish the task's status to the listen streams naming it (``notifications/tasks``,
        the ``DetailedTask`` as ``tasks/get`` answers it); a failure is logged, the record stays."""
        if self.notify is None:
            return
        try:
            record = task if isinstance(task, TaskRecord) else await self.store.get(owner, task)
            if record is not None:
                await self.notify(owner, detailed_params(record))
        except Exception as exc:  # listeners poll tasks/get anyway (the notification is a MAY)
            logger.warning("could not publish the status of a task: %s", exc)

    async def _tell(self, task_id: str, op: str) -> None:
        if self.on_relay({"t": task_id, "op": op}) or self.publish is None:
            return
        try:
            await self.publish({"k": "task", "t": task_id, "op": op})
        except Exception as exc:  # the record already says it; the runner reads it at its next renewal
            logger.warning("could not tell the other replicas about task %s (%s): %s", task_id, op, exc)

    def on_relay(self, message: Mapping[str, Any]) -> bool:
        """Act on a relayed (or local) ``cancel`` / ``wake`` of a task running here; False when
        it does not run here."""
        running = self._running.get(str(message.get("t")))
        if running is None:
            return False
        if message.get("op") == "cancel":
            running.signal.cancel(CANCELLED_BY_CLIENT)
        else:
            running.channel.wake.set()
        return True

    # -- creating and running ------------------------------------------------------------
    async def create(self, owner: str, ttl_ms: int | None = None) -> TaskRecord:
        """Write a new ``working`` task of ``owner`` (durable before this returns).

        Raises:
            ServerShuttingDownError: shutdown began (503, ``Retry-After``).
            TaskQuotaExceededError: the owner holds ``MCP_MAX_TASKS_PER_OWNER`` tasks.
            StateUnavailableError: the store is down.
        """
        if self.shutdown is not None and self.shutdown.shutting_down:
            raise ServerShuttingDownError("The server is shutting down: no new task starts here, retry on another replica")
        s = self.settings
        task_id = secrets.token_urlsafe(24)
        return await self.store.create(
            task_id, owner, ttl_ms or s.task_ttl_ms, s.task_poll_interval_ms, self.lease_ms, s.max_tasks_per_owner
        )

    def _attach(self, record: TaskRecord, owner: str, state: CallState, signal: CancelSignal) -> None:
        channel = TaskChannel(
            self.store, owner, record.task_id, self.lease_ms / 3000, lambda: self.changed(owner, record.task_id), self.retry
        )
        state.task = TaskHandle(record.task_id, self, owner, state)
        state.task_starter = None
        state.back_channel = channel
        running = self._running[record.task_id] = _Running(owner, signal, channel, record.created_ms + record.ttl_ms)
        running.keeper = self._spawn(self._keep_lease(record.task_id, owner, signal))

    async def run(
        self,
        owner: str,
        state: CallState,
        runner: Runner,
        background: BackgroundTasks,
        *,
        start: TaskStart = "call",
        required: bool = False,
        ttl_ms: int | None = None,
        outbound: Outbound | None = None,
    ) -> TaskRecord | Reply | None:
        """Run one call as a task; return what the ``tools/call`` is answered with: the created
        record, or (``start="handler"``, the handler ended before ``ctx.start_task()``) the call's
        own reply (an ``input_required`` round, an error; a result too unless ``required``, when it
        is stored as an already completed task).

        ``outbound``: the call's own stream. Until ``ctx.start_task()`` a ``start="handler"``
        call sends on it as any call does (2025: its questions, ``elicitation/create``...);
        a task sends nothing (no progress or log messages for tasks, SEP-2663).

        ``state.signal`` cancels the task (tasks/cancel, shutdown); the HTTP request's own
        signal is not this one. Raises as :meth:`create`.
        """
        signal = state.signal
        if start == "call":
            record = await self.create(owner, ttl_ms)
            self._attach(record, owner, state, signal)
            self._spawn(self._body(owner, state, runner, background, _drop))
            return record
        started: asyncio.Future[TaskRecord] = asyncio.get_running_loop().create_future()

        async def until_started(message: dict[str, Any]) -> None:
            if state.task is None and outbound is not None:
                await outbound(message)

        async def starter() -> TaskHandle:
            if state.task is None:
                record = await self.create(owner, ttl_ms)
                self._attach(record, owner, state, signal)
                if not started.done():
                    started.set_result(record)
            assert isinstance(state.task, TaskHandle)
            return state.task

        state.task_starter = starter
        body = self._spawn(self._body(owner, state, runner, background, until_started))
        await asyncio.wait({started, body}, return_when=asyncio.FIRST_COMPLETED)
        if started.done():
            return started.result()
        state.task_starter = None
        reply = body.result()
        if reply is None or not required:
            return reply
        status, payload = task_outcome(reply)
        if status != "completed" or payload is None or reply.message.get("result", {}).get("resultType") == "input_required":
            return reply
        record = await self.create(owner, ttl_ms)  # a required task tool answers with a task, even one already done
        await self.store.finish(owner, record.task_id, "completed", None, json.dumps(payload, separators=(",", ":")))
        return await self.get(owner, record.task_id)

    def _spawn(self, work: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _body(
        self, owner: str, state: CallState, runner: Runner, background: BackgroundTasks, outbound: Outbound
    ) -> Reply | None:
        """The run; returns the reply only when the call ended before it became a task. Never
        raises once it is a task (its end is written, else logged)."""
        signal = state.signal
        guard = CancelSignal()  # holds the shutdown's wait open until the record is written
        if self.shutdown is not None:
            self.shutdown.call_started(guard)
        reply: Reply | None = None  # stays None when the handler's scope was cancelled
        try:
            with new_cancel_scope() as scope:
                signal.bind(scope)
                try:
                    reply = await runner(outbound)
                finally:
                    signal.bind(None)
            if state.task is None:
                return reply
            await self._finish(state.task.task_id, owner, reply, signal, state.request_id)
            await self.changed(owner, state.task.task_id)
            if reply is not None and "result" in reply.message and signal.reason is None:
                await run_background(background)
            return None
        except Exception:
            logger.exception("task %s failed", state.task.task_id if state.task is not None else "(not started)")
            if state.task is not None:
                await self._end(owner, state.task.task_id, "failed", "Internal error", TaskFailedError().to_error(state.request_id))
            return None
        finally:
            running = self._running.pop(state.task.task_id, None) if state.task is not None else None
            if running is not None and running.keeper is not None:
                running.keeper.cancel()
            if self.shutdown is not None:
                self.shutdown.call_ended(guard)

    async def _finish(self, task_id: str, owner: str, reply: Reply | None, signal: CancelSignal, request_id: str | int | None) -> None:
        if signal.reason == SHUTDOWN_REASON:
            error = TaskFailedError("The server shut down before the task ended", reason="server_shut_down")
            await self._end(owner, task_id, "failed", "server shut down", error.to_error(request_id))
            return
        status, payload = task_outcome(reply)
        if signal.reason is not None or payload is None:
            await self._end(owner, task_id, "cancelled", "The task was cancelled by the client", None)
            return
        encoded = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        limit = self.settings.task_max_result_bytes
        if len(encoded.encode()) > limit:
            error = TaskFailedError(
                f"The task's {'result' if status == 'completed' else 'error'} is larger than {limit} bytes (MCP_TASK_MAX_RESULT_BYTES)",
                reason="task_result_too_large",
            )
            await self._end(owner, task_id, "failed", error.message, error.to_error(request_id))
            return
        await self._end(owner, task_id, status, None, encoded)

    async def _end(self, owner: str, task_id: str, status: TaskStatus, message: str | None, payload: str | dict[str, Any] | None) -> None:
        """Write the task's end (``payload``: JSON, or an error object), again while the store is
        unavailable: until the task's TTL, at most :data:`FINISH_RETRY_SECONDS`. Never raises: a
        failure is logged (the task then reads ``task_lost`` once its lease lapsed)."""
        encoded = json.dumps(payload) if isinstance(payload, dict) else payload
        running = self._running.get(task_id)
        left = FINISH_RETRY_SECONDS if running is None else (running.expires_ms - time.time() * 1000) / 1000
        try:
            await self.retry.run(
                lambda: self.store.finish(owner, task_id, status, message, encoded),
                f"task {task_id[:8]}… ending {status}",
                max(0.0, min(left, FINISH_RETRY_SECONDS)),
            )
        except Exception:
            logger.exception("could not write the end (%s) of task %s", status, task_id)

    async def _keep_lease(self, task_id: str, owner: str, signal: CancelSignal) -> None:
        period = self.lease_ms / 3000
        wait = period
        while True:
            await self.lease_sleep(wait)
            try:
                alive = await self.store.renew(owner, task_id, self.lease_ms)
            except Exception as exc:  # the store is down: try again sooner (at most every 2 s); the run goes on
                logger.warning("could not renew the lease of task %s: %s", task_id, exc)
                wait = min(period, self.retry.cap, 0.25 if wait >= period else wait * 2)
                continue
            wait = period
            if not alive:  # cancelled elsewhere (its relay message lost), or lapsed by a reader
                signal.cancel(CANCELLED_BY_CLIENT)
                return

    async def aclose(self) -> None:
        """Cancel every task still running here (tests; a router's ``aclose``)."""
        for running in list(self._running.values()):
            running.signal.cancel(SHUTDOWN_REASON)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)
