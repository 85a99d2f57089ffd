"""Both eras' wire shapes of tasks, over one :class:`~.engine.TaskEngine`.

2026-07-28, extension ``io.modelcontextprotocol/tasks`` (SEP-2663): advertised under
``capabilities.extensions``; a task tool called with the extension in the request's
``_meta`` client capabilities answers ``{"resultType": "task", "taskId", "status",
"createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}`` (flat, never ``requestState``);
``tasks/get`` inlines ``result`` / ``error`` / ``inputRequests``; ``tasks/update`` and
``tasks/cancel`` answer an empty ack; a request without the extension gets ``-32021``
(``data.requiredCapabilities.extensions``), a ``required`` task tool too; ``tasks/result`` and
``tasks/list`` are not served (``-32601``).

2025-11-25 (SEP-1686, ``basic/utilities/tasks``): capability ``tasks`` (``list``, ``cancel``,
``requests.tools.call``), tools list ``execution.taskSupport``; a ``tools/call`` with
``task: {ttl?}`` answers ``{"task": {...}}``; ``tasks/get``, ``tasks/list`` (the caller's own,
paginated), ``tasks/cancel`` (``-32602`` on a terminal task), ``tasks/result`` (blocks until
terminal; the result carries ``_meta["io.modelcontextprotocol/related-task"]``, a failed task
answers its error). A ``required`` task tool called without ``task`` is ``-32601``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final, Literal

from .._transport.streams import Reply
from .._wire.pages import paginate
from ..errors import InvalidParamsError, McpError, MethodNotFoundError, MissingCapabilityError, TaskNotFoundError, TaskTtlError
from ..settings import McpSettings
from .records import TaskRecord, TaskStatus, iso

__all__ = [
    "EXTENSION",
    "LEGACY_METHODS",
    "MODERN_METHODS",
    "RELATED_TASK",
    "TaskSupport",
    "legacy_capability",
    "legacy_task",
    "modern_detailed",
    "task_outcome",
    "task_request",
]

EXTENSION: Final = "io.modelcontextprotocol/tasks"
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
MODERN_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
LEGACY_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
TaskSupport = Literal["optional", "required"]


def declares_extension(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a 2026 request's client capabilities name the tasks extension."""
    extensions = (capabilities or {}).get("extensions")
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def missing_extension(what: str) -> MissingCapabilityError:
    """``-32021`` with ``data.requiredCapabilities = {"extensions": {EXTENSION: {}}}``."""
    return MissingCapabilityError(
        {"extensions": {EXTENSION: {}}},
        f"{what} needs the client capability extensions[{EXTENSION!r}], which this request did not declare",
    )


def legacy_capability() -> dict[str, Any]:
    """The 2025-11-25 ``ServerCapabilities.tasks``."""
    return {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def task_request(
    support: TaskSupport,
    era: str,
    params: Mapping[str, Any],
    capabilities: Mapping[str, Any] | None,
    settings: McpSettings,
    tool: str,
) -> int | Literal[False] | None:
    """Whether a ``tools/call`` of a task tool runs as a task: ``False`` (a plain call), else the
    ``ttlMs`` to give it (None: the default).

    Raises:
        MissingCapabilityError: 2026, a ``required`` task tool without the extension (-32021).
        MethodNotFoundError: 2025, a ``required`` task tool called without ``task`` (-32601).
        TaskTtlError: 2025, a ``task.ttl`` out of ``MCP_TASK_MIN_TTL_MS`` .. ``MCP_TASK_MAX_TTL_MS``.
    """
    if era == "modern":
        if declares_extension(capabilities):
            return None
        if support == "required":
            raise missing_extension(f"Tool {tool!r} runs only as a task: it")
        return False
    task = params.get("task")
    if task is None:
        if support == "required":
            raise MethodNotFoundError(
                f'Tool {tool!r} runs only as a task: call it with params.task (execution.taskSupport is "required")',
                data={"method": "tools/call"},
            )
        return False
    if not isinstance(task, Mapping):
        raise InvalidParamsError("tools/call 'task' must be an object ({\"ttl\": <milliseconds>})")
    ttl = task.get("ttl")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if ttl is None:
        return None
    low, high = settings.task_min_ttl_ms, settings.task_max_ttl_ms
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not low <= ttl <= high:
        raise TaskTtlError(
            f"task.ttl must be an integer number of milliseconds from {low} to {high} (MCP_TASK_MIN_TTL_MS, MCP_TASK_MAX_TTL_MS), not {ttl!r}"
        )
    return ttl


def _base(record: TaskRecord) -> dict[str, Any]:
    shape: dict[str, Any] = {"taskId": record.task_id, "status": record.status}
    if record.status_message:
        shape["statusMessage"] = record.status_message
    shape["createdAt"] = iso(record.created_ms)
    shape["lastUpdatedAt"] = iso(record.updated_ms)
    return shape


def modern_created(record: TaskRecord) -> dict[str, Any]:
    """2026 ``CreateTaskResult``: ``Result & Task``, ``resultType: "task"``."""
    return {"resultType": "task", **_base(record), "ttlMs": record.ttl_ms, "pollIntervalMs": record.poll_ms}


def modern_detailed(record: TaskRecord) -> dict[str, Any]:
    """2026 ``GetTaskResult`` (``DetailedTask``): the task with its status's payload inlined."""
    shape = {"resultType": "complete", **_base(record), "ttlMs": record.ttl_ms, "pollIntervalMs": record.poll_ms}
    if record.status == "input_required" and record.input_requests:
        shape["inputRequests"] = dict(record.input_requests)
    elif record.status == "completed" and record.result is not None:
        shape["result"] = record.result
    elif record.status == "failed" and record.error is not None:
        shape["error"] = record.error
    return shape


def detailed_params(record: TaskRecord) -> dict[str, Any]:
    """The params of a 2026 ``notifications/tasks``: the ``DetailedTask`` without ``resultType``."""
    shape = modern_detailed(record)
    del shape["resultType"]
    return shape


def legacy_task(record: TaskRecord) -> dict[str, Any]:
    """2025-11-25 ``Task``."""
    return {**_base(record), "ttl": record.ttl_ms, "pollInterval": record.poll_ms}


def legacy_created(record: TaskRecord) -> dict[str, Any]:
    """2025-11-25 ``CreateTaskResult``: ``{"task": Task}``."""
    return {"task": legacy_task(record)}


def legacy_list(records: list[TaskRecord], cursor: Any, page_size: int) -> dict[str, Any]:
    """2025-11-25 ``ListTasksResult`` of the caller's tasks (``nextCursor`` while more remain)."""
    return paginate("tasks", "tasks", [legacy_task(r) for r in records], cursor, page_size)


class StoredError(McpError):
    """A task's stored JSON-RPC error, answered again as it was (2025 ``tasks/result``)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(str(error.get("message", "Internal error")))
        self.stored = dict(error)
        code = error.get("code")
        self.code = code if isinstance(code, int) and not isinstance(code, bool) else -32603

    def to_error(self, request_id: str | int | None = None) -> dict[str, Any]:
        return dict(self.stored)


def legacy_result(record: TaskRecord) -> dict[str, Any]:
    """2025 ``tasks/result`` of a terminal task: its result with the related-task ``_meta``.

    Raises:
        StoredError: the task failed (its JSON-RPC error).
        TaskNotFoundError: cancelled (no result exists).
    """
    if record.status == "failed":
        raise StoredError(record.error or {"code": -32603, "message": "The task failed"})
    if record.status == "cancelled" or record.result is None:
        raise TaskNotFoundError("The task was cancelled: it has no result", reason="task_cancelled")
    result = dict(record.result)
    meta = dict(result.get("_meta") or {})
    meta[RELATED_TASK] = {"taskId": record.task_id}
    result["_meta"] = meta
    return result


async def wait_terminal(get: Any, owner: str, task_id: Any, poll_seconds: float) -> TaskRecord:
    """Read the task until it is terminal (2025 ``tasks/result`` blocks): every 50 ms at first,
    doubling up to ``poll_seconds``."""
    delay = 0.05
    while True:
        record: TaskRecord = await get(owner, task_id)
        if record.terminal:
            return record
        await asyncio.sleep(delay)
        delay = min(delay * 2, poll_seconds)


SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"


def task_outcome(reply: Reply | None) -> tuple[TaskStatus, dict[str, Any] | None]:
    """A finished run's end as stored: ``("completed", result)`` (its ``resultType`` and the
    server's ``_meta`` serverInfo dropped: ``tasks/get`` inlines it), ``("failed", error)`` for a
    JSON-RPC error, ``("cancelled", None)`` when the run produced no reply."""
    if reply is None:
        return "cancelled", None
    message = reply.message
    if "error" in message:
        return "failed", dict(message["error"])
    result = dict(message.get("result") or {})
    result.pop("resultType", None)
    meta = result.get("_meta")
    if isinstance(meta, dict) and SERVER_INFO_KEY in meta:
        rest = {k: v for k, v in meta.items() if k != SERVER_INFO_KEY}  # pyright: ignore[reportUnknownVariableType]
        if rest:
            result["_meta"] = rest
        else:
            del result["_meta"]
    return "completed", result
