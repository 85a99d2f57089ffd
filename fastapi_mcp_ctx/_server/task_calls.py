"""The dispatcher's side of tasks (``_tasks``): whose a task is, a task tool's call as a task,
the ``tasks/*`` methods and capabilities of each era.

Kept apart from ``dispatch.py`` and ``tool_calls.py``, which only route here: ``tasks/*`` to
:func:`serve_task_method`, a task tool's ``tools/call`` the client opted into to :func:`task_call`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal

from fastapi.background import BackgroundTasks
from starlette.requests import Request

from .._context.cancel_signal import CancelSignal
from .._handlers.tool_def import ToolDef
from .._tasks.engine import TaskEngine
from .._tasks.records import ANONYMOUS_OWNER, TaskRecord, owner_key
from .._tasks.wire import (
    EXTENSION,
    LEGACY_METHODS,
    MODERN_METHODS,
    RELATED_TASK,
    declares_extension,
    legacy_capability,
    legacy_created,
    legacy_list,
    legacy_result,
    legacy_task,
    missing_extension,
    modern_created,
    modern_detailed,
    task_request,
    wait_terminal,
)
from .._transport.sessions import SessionRecord
from .._transport.streams import Outbound, Reply
from .._wire.envelope import RequestEnvelope
from .._wire.jsonrpc import result_message
from ..auth import Principal
from ..context import Context
from ..errors import InvalidParamsError, McpError, MethodNotFoundError
from ..inputs import answer_for
from ..settings import McpSettings
from .input_rounds import refuse_oversized
from .outcomes import PreparedCall, error_reply

__all__ = [
    "MAX_INPUT_RESPONSES",
    "as_task",
    "call_owner",
    "legacy_result_run",
    "serve_task_method",
    "task_answers",
    "task_call",
    "task_capabilities",
    "task_methods",
]

logger = logging.getLogger("fastapi_mcp_ctx")

MAX_INPUT_RESPONSES: Final = 64
"""The most entries one ``tasks/update`` ``inputResponses`` may carry (more: -32602)."""


def call_owner(principal: Principal | None, session: SessionRecord | None, envelope: RequestEnvelope) -> str:
    """Whose a task is (spec 2025-11-25 ``basic/utilities/tasks`` §Security: bound to the
    authorization context, else to the session): the authenticated tenant, subject and OAuth
    client; an anonymous 2025 caller's session (its own tasks and its own quota); else
    :data:`~.._tasks.records.ANONYMOUS_OWNER`, whose tasks are reached by their unguessable id
    only and never listed."""
    if principal is not None:
        return owner_key(principal.tenant_id, principal.subject, principal.client_id)
    if envelope.era == "legacy" and session is not None:
        return owner_key(None, None, f"session:{session.id}")
    return owner_key(None, None, None)


def as_task(tool: ToolDef, envelope: RequestEnvelope, params: Mapping[str, Any], settings: McpSettings) -> int | Literal[False] | None:
    """Whether this ``tools/call`` runs as a task: ``False`` (a plain call), else its ``ttlMs``
    (None: the default). See :func:`~.._tasks.wire.task_request` for a task tool's rules.

    Raises:
        MethodNotFoundError: 2025, ``params.task`` for a tool without ``execution.taskSupport``
            (-32601, spec 2025-11-25 ``basic/utilities/tasks`` §Tool-Level Negotiation).
        MissingCapabilityError / TaskTtlError: as ``task_request``.
    """
    if tool.task is not None:
        return task_request(tool.task, envelope.era, params, envelope.client_capabilities, settings, tool.name)
    if envelope.era == "legacy" and params.get("task") is not None:
        raise MethodNotFoundError(
            f"Tool {tool.name!r} does not run as a task (no execution.taskSupport): call it without params.task",
            data={"method": "tools/call"},
        )
    return False


def task_methods(era: str) -> frozenset[str]:
    """The ``tasks/*`` methods served in ``era`` (once a task tool is registered)."""
    return MODERN_METHODS if era == "modern" else LEGACY_METHODS


def task_capabilities(table: frozenset[str], era: str) -> dict[str, Any]:
    """2026: ``extensions`` naming the tasks extension; 2025: ``tasks``; nothing without tasks."""
    if "tasks/get" not in table:
        return {}
    return {"extensions": {EXTENSION: {}}} if era == "modern" else {"tasks": legacy_capability()}


def task_call(
    engine: TaskEngine,
    prepared: PreparedCall,
    tool: ToolDef,
    owner: str,
    ttl_ms: int | None,
    finish: Callable[[dict[str, Any]], dict[str, Any]],
) -> PreparedCall:
    """The ``tools/call`` of a task tool the client opted into: its runner answers with the
    created task (2026 ``resultType: "task"``, 2025 ``{"task": …}``) once the record is written,
    while ``prepared`` runs on as the task (``_tasks.engine``). The transport's signal is not the
    task's: a disconnect after the answer leaves the task running."""
    state = prepared.state
    assert state is not None
    era, request_id = state.envelope.era, state.request_id
    required = tool.task == "required"

    async def runner(outbound: Outbound) -> Reply | None:
        try:
            outcome = await engine.run(
                owner, state, prepared.runner, prepared.background, start=tool.task_start, required=required, ttl_ms=ttl_ms,
                outbound=outbound,  # a handler-start call's own stream until ctx.start_task() (2025: its questions)
            )
        except McpError as exc:
            return error_reply(request_id, exc, era)
        except asyncio.CancelledError:
            if state.task is None:  # the client left before the task existed: the call ends with it
                state.signal.cancel("disconnected")
            raise
        if outcome is None or isinstance(outcome, Reply):
            return outcome
        shape = modern_created(outcome) if era == "modern" else legacy_created(outcome)
        return Reply(result_message(request_id, finish(shape)))

    return PreparedCall(runner, CancelSignal(), BackgroundTasks(), lambda: None, None)


async def serve_task_method(
    engine: TaskEngine, method: str, params: Mapping[str, Any], envelope: RequestEnvelope, owner: str, settings: McpSettings
) -> dict[str, Any]:
    """``tasks/get`` / ``tasks/update`` / ``tasks/cancel`` (2026) or ``tasks/get`` /
    ``tasks/result`` / ``tasks/list`` / ``tasks/cancel`` (2025) of ``owner``'s tasks.

    Raises:
        MissingCapabilityError: 2026, the request did not declare the extension (-32021).
        TaskNotFoundError: unknown, expired or another owner's ``taskId`` (-32602).
        InvalidParamsError: 2026 ``inputResponses`` not an object; 2025 cancel of a terminal task.
        StoredError: 2025 ``tasks/result`` of a failed task (its own error).
    """
    task_id = params.get("taskId")
    if envelope.era == "modern":
        if not declares_extension(envelope.client_capabilities):
            raise missing_extension(method)
        if method == "tasks/get":
            return modern_detailed(await engine.get(owner, task_id))
        if method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(responses, Mapping):
                raise InvalidParamsError("tasks/update requires an object 'inputResponses' keyed as the task's inputRequests")
            if len(responses) > MAX_INPUT_RESPONSES:  # pyright: ignore[reportUnknownArgumentType]
                raise InvalidParamsError(
                    f"tasks/update 'inputResponses' has {len(responses)} entries, at most {MAX_INPUT_RESPONSES}",  # pyright: ignore[reportUnknownArgumentType]
                    reason="too_many_input_responses",
                    recovery_hint="Answer only the keys of the task's inputRequests.",
                )
            answers = task_answers(await engine.get(owner, task_id), responses, settings)  # pyright: ignore[reportUnknownArgumentType]
            if answers:
                await engine.update(owner, task_id, answers)
            return {}
        await engine.cancel(owner, task_id)
        return {}
    if method == "tasks/list":
        if owner == ANONYMOUS_OWNER:  # neither an identity nor a session: no task is this caller's to list
            return {"tasks": []}
        return legacy_list(await engine.store.list(owner), params.get("cursor"), settings.page_size)
    if method == "tasks/get":
        return legacy_task(await engine.get(owner, task_id))
    if method == "tasks/result":  # without a stream to ask on (the dispatcher serves it with legacy_result_run)
        return legacy_result(await wait_terminal(engine.get, owner, task_id, settings.task_poll_interval_ms / 1000))
    record = await engine.get(owner, task_id)
    if record.terminal:
        raise InvalidParamsError(f"Cannot cancel task: it is already {record.status}", reason="task_terminal")
    return legacy_task(await engine.cancel(owner, task_id))


def task_answers(record: TaskRecord, responses: Mapping[str, Any], settings: McpSettings) -> dict[str, dict[str, Any]]:
    """The answers of ``responses`` to record for ``record``'s pending input requests, each
    checked against the result type of the request it answers (``inputs.answer_for``: the rule
    of ``tools/call`` ``inputResponses``); keys the task did not ask (or already answered) are
    dropped, never stored.

    Raises:
        InvalidParamsError: an answer that is not a result of its request's method (-32602,
            ``reason: invalid_input_response``; the question stays pending), or answers larger
            than half of ``MCP_REQUEST_STATE_MAX_BYTES`` (``reason: input_responses_too_large``).
    """
    answers: dict[str, dict[str, Any]] = {}
    for key, answer in responses.items():
        entry = record.input_requests.get(key)
        if not isinstance(entry, Mapping) or key in record.answers:
            continue
        method = str(entry.get("method"))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        admitted = answer_for(answer, method)
        if admitted is None:
            raise InvalidParamsError(
                f"inputResponses[{key[:64]!r}] is not a result of {method} (the task's question is still pending)",
                reason="invalid_input_response",
                recovery_hint=f"Answer {method} with its result type (elicitation/create: an ElicitResult, action accept, decline or cancel).",
                data={"key": key[:256], "method": method},
            )
        answers[key] = admitted
    if answers:
        refuse_oversized(answers, settings.request_state_max_bytes)
    return answers


def legacy_result_run(
    engine: TaskEngine, owner: str, task_id: Any, poll_seconds: float
) -> Callable[[Context, Request, BackgroundTasks], Awaitable[dict[str, Any]]]:
    """2025 ``tasks/result`` as a call (its ``run``): it blocks until the task is terminal and,
    while the task is ``input_required``, sends each pending input request to the client on
    this request's stream (``_meta["io.modelcontextprotocol/related-task"]``), recording the
    answer as ``tasks/update`` would (spec 2025-11-25 ``basic/utilities/tasks`` §Input Required
    Status). Raises as :func:`~.._tasks.wire.legacy_result` and ``TaskNotFoundError``."""

    async def relay(context: Context, key: str, entry: Mapping[str, Any], found: str) -> None:
        params = {**dict(entry.get("params") or {}), "_meta": {RELATED_TASK: {"taskId": found}}}
        try:
            answer = await context.send_request(str(entry.get("method")), params)
            record = await engine.get(owner, found)
            answers = task_answers(record, {key: answer}, engine.settings)
        except McpError as exc:  # the task's own question times out: its handler decides
            logger.info("tasks/result could not ask the client for task %s (%s): %s", found, key, exc.message)
            return
        if answers:
            await engine.update(owner, found, answers)

    async def run(context: Context, request: Request, background: BackgroundTasks) -> dict[str, Any]:
        asked: dict[str, asyncio.Task[None]] = {}
        delay = 0.05
        try:
            while True:
                record = await engine.get(owner, task_id)
                if record.terminal:
                    return legacy_result(record)
                for key, entry in record.input_requests.items():
                    if key not in asked:
                        asked[key] = asyncio.create_task(relay(context, key, entry, record.task_id))
                await asyncio.sleep(delay)
                delay = min(delay * 2, poll_seconds)
        finally:
            for waiting in asked.values():
                waiting.cancel()

    return run
