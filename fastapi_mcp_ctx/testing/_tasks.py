"""``McpTestClient``'s task members, both eras: create, poll, update, cancel (``_tasks``, docs/tasks.md).

2026-07-28 (extension ``io.modelcontextprotocol/tasks``): the client must declare the extension,
``McpTestClient(app, era="modern", client_capabilities=TASKS_CAPABILITY)``; ``tasks/get`` answers
the whole ``DetailedTask``. 2025-11-25: the call carries ``task: {ttl?}``; ``tasks/result`` gives
the result, ``tasks/list`` the caller's tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

import anyio
from mcp_types import _v2025_11_25 as v2025  # pyright: ignore[reportPrivateUsage]

from .._wire.envelope import Era
from ..errors import TestClientTaskError
from ._features import Requester, every_page

__all__ = ["TASKS_CAPABILITY", "TaskRequests", "refuse_task"]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASKS_CAPABILITY: Final[dict[str, Any]] = {"extensions": {TASKS_EXTENSION: {}}}
"""The 2026 ``client_capabilities`` that opt into tasks (merge with others as needed)."""
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


def refuse_task(name: str, result: Mapping[str, Any]) -> None:
    """``call_tool``'s check: a task answer (``resultType: "task"``, 2025 ``{"task": …}``) is no
    tool result, so a test asserting on it would check nothing.

    Raises:
        TestClientTaskError: naming ``call_tool_as_task`` and the task id.
    """
    task_id = result.get("taskId") if result.get("resultType") == "task" else None
    if task_id is None and isinstance(result.get("task"), Mapping) and "content" not in result:
        task_id = result["task"].get("taskId")
    if task_id is not None:
        raise TestClientTaskError(
            f"tools/call {name!r} was answered with task {task_id!r}, not a tool result: call "
            "call_tool_as_task() then wait_task() (2026) or task_result() (2025), or leave TASKS_CAPABILITY "
            "undeclared for a plain call"
        )


class _Client(Requester, Protocol):
    era: Era
    validate: bool
    client_capabilities: dict[str, Any]


class TaskRequests:
    """The task methods of ``McpTestClient`` (a mixin)."""

    __slots__ = ()

    async def call_tool_as_task(
        self: _Client, name: str, arguments: Mapping[str, Any] | None = None, *, ttl_ms: int | None = None
    ) -> dict[str, Any]:
        """Call task tool ``name`` and return the task it became: 2026 the flat
        ``CreateTaskResult`` (``resultType: "task"``), 2025 the ``task`` of ``{"task": …}``.

        Args:
            ttl_ms: 2025 ``task.ttl`` (milliseconds; None: the server's default). 2026: unused.
        Raises:
            ValueError: a 2026 client that did not declare the extension (see the module docstring).
            AssertionError: the server answered a plain result, not a task.
            McpResponseError: a protocol error (-32021, -32601, -32602...).
        """
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        if self.era == "modern":
            if TASKS_EXTENSION not in (self.client_capabilities.get("extensions") or {}):
                raise ValueError(
                    "declare the tasks extension: McpTestClient(app, era='modern', client_capabilities=TASKS_CAPABILITY)"
                )
            result = (await self.request("tools/call", params)).result
            assert result.get("resultType") == "task", f"tools/call of {name!r} answered no task: {result}"
            return result
        params["task"] = {} if ttl_ms is None else {"ttl": ttl_ms}
        checking, self.validate = self.validate, False  # a CreateTaskResult, not a CallToolResult
        try:
            result = (await self.request("tools/call", params)).result
        finally:
            self.validate = checking
        if checking:
            v2025.CreateTaskResult.model_validate(result)
        assert "task" in result, f"tools/call of {name!r} answered no task: {result}"
        return dict(result["task"])

    async def get_task(self: _Client, task_id: str) -> dict[str, Any]:
        """``tasks/get``: the task (2026 with ``result`` / ``error`` / ``inputRequests`` inlined).

        Raises:
            McpResponseError: -32602 for an unknown, expired or another caller's task.
        """
        return (await self.request("tasks/get", {"taskId": task_id})).result

    async def wait_task(self: _Client, task_id: str, *, timeout: float = 10.0, until: str | None = None) -> dict[str, Any]:
        """Poll ``tasks/get`` (every 20 ms) until the task is terminal, or has status ``until``.

        Raises:
            TimeoutError: not reached within ``timeout`` seconds.
        """
        with anyio.fail_after(timeout):
            while True:
                task = (await self.request("tasks/get", {"taskId": task_id})).result
                if task.get("status") in _TERMINAL or task.get("status") == until:
                    return task
                await anyio.sleep(0.02)

    async def update_task(self: _Client, task_id: str, input_responses: Mapping[str, Any]) -> dict[str, Any]:
        """2026 ``tasks/update`` with ``inputResponses`` (keys of the task's ``inputRequests``); the ack."""
        return (await self.request("tasks/update", {"taskId": task_id, "inputResponses": dict(input_responses)})).result

    async def cancel_task(self: _Client, task_id: str) -> dict[str, Any]:
        """``tasks/cancel``: 2026 the empty ack, 2025 the cancelled task.

        Raises:
            McpResponseError: -32602 unknown task (2025: also a task already terminal).
        """
        return (await self.request("tasks/cancel", {"taskId": task_id})).result

    async def task_result(self: _Client, task_id: str) -> dict[str, Any]:
        """2025 ``tasks/result``: blocks until the task is terminal; its result, or its error raised.

        Raises:
            McpResponseError: the task failed (its JSON-RPC error), was cancelled or is unknown.
        """
        return (await self.request("tasks/result", {"taskId": task_id})).result

    async def list_tasks(self: _Client) -> list[dict[str, Any]]:
        """2025 ``tasks/list``: every task of this caller (all pages)."""
        return await every_page(self, "tasks/list", "tasks")
