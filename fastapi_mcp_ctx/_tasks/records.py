"""One task's record and the :class:`TaskStore` Protocol its stores implement.

A record is a flat map of strings (a Redis hash, or a dict in memory), so a store changes one
field without decoding the others (a result is never re-encoded by a Lua script):

==============  ===============================================================================
``owner``       the owner key (:func:`owner_key`): tenant, subject and client, JSON
``status``      ``working`` | ``input_required`` | ``completed`` | ``failed`` | ``cancelled``
``msg``         the ``statusMessage`` ('' none)
``created``     creation time, ms since the epoch (the store's clock); ``updated`` likewise
``ttl``         ``ttlMs``: the record is deleted ``ttl`` ms after ``created``
``poll``        ``pollIntervalMs``
``lease``       until when (ms) the running replica's lease holds; past it, a non-terminal task
                reads ``failed`` (``reason: task_lost``)
``result``      the result (JSON) of a ``completed`` task; ``error`` the JSON-RPC error of a
                ``failed`` one
``q:<key>``     a pending input request (JSON ``{"method", "params"}``); ``a:<key>`` its answer,
                until the task ends
==============  ===============================================================================
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol

__all__ = [
    "ACTIVE",
    "ANONYMOUS_OWNER",
    "LOST_ERROR",
    "TERMINAL",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "iso",
    "owner_hash",
    "owner_key",
]

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
ACTIVE: Final = frozenset({"working", "input_required"})

LOST_MESSAGE: Final = "The replica running this task stopped before it ended (its lease expired)"
LOST_ERROR: Final = json.dumps({"code": -32603, "message": LOST_MESSAGE, "data": {"reason": "task_lost"}}, separators=(",", ":"))
"""The ``error`` a store writes when it finds an active task whose lease expired."""


def owner_key(tenant_id: str | None, subject: str | None, client: str | None) -> str:
    """Who may read a task: tenant, subject and client together (JSON, so no separator can be
    forged). ``client`` is the OAuth client id when known, else the 2025 session id of an
    anonymous caller, else ''."""
    return json.dumps([tenant_id or "", subject or "", client or ""], separators=(",", ":"))


ANONYMOUS_OWNER: Final = owner_key(None, None, None)
"""The owner of a caller with neither an identity nor a 2025 session: its tasks are reachable by
their unguessable id only, never listed (``tasks/list`` answers it an empty list)."""


def owner_hash(owner: str) -> str:
    """The 32 hex characters naming ``owner`` in keys (the Redis hash tag of its tasks)."""
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


def iso(ms: int) -> str:
    """ISO 8601 UTC with milliseconds, e.g. ``2026-12-02T01:30:00.123Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@dataclass(slots=True)
class TaskRecord:
    """A task as read from its store (times in ms since the epoch, on the store's clock)."""

    task_id: str
    owner: str
    status: TaskStatus
    created_ms: int
    updated_ms: int
    ttl_ms: int
    poll_ms: int
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] = field(default_factory=lambda: {})
    answers: dict[str, Any] = field(default_factory=lambda: {})

    @property
    def terminal(self) -> bool:
        """True once ``completed``, ``failed`` or ``cancelled``."""
        return self.status in TERMINAL

    @classmethod
    def from_fields(cls, task_id: str, fields: Mapping[str, str]) -> TaskRecord:
        """Decode a stored map (module docstring); ``ValueError`` when it is not a record."""
        try:
            record = cls(
                task_id,
                fields["owner"],
                fields["status"],  # type: ignore[arg-type]
                int(fields["created"]),
                int(fields["updated"]),
                int(fields["ttl"]),
                int(fields["poll"]),
                fields.get("msg") or None,
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"task {task_id!r}: not a task record ({exc})") from None
        if "result" in fields:
            record.result = json.loads(fields["result"])
        if "error" in fields:
            record.error = json.loads(fields["error"])
        for name, value in fields.items():
            if name.startswith("q:"):
                record.input_requests[name[2:]] = json.loads(value)
            elif name.startswith("a:"):
                record.answers[name[2:]] = json.loads(value)
        return record


def new_fields(owner: str, ttl_ms: int, poll_ms: int, now_ms: int, lease_ms: int) -> dict[str, str]:
    """The stored map of a task created ``working`` at ``now_ms`` (a store sets its own clock's time)."""
    return {
        "owner": owner,
        "status": "working",
        "msg": "",
        "created": str(now_ms),
        "updated": str(now_ms),
        "ttl": str(ttl_ms),
        "poll": str(poll_ms),
        "lease": str(now_ms + lease_ms),
    }


class TaskStore(Protocol):
    """Where task records live: every method is one atomic step on the store's clock, scoped to
    ``owner`` (another owner's task id is not found: None / False). Redis failures raise
    :class:`~fastapi_mcp_ctx.errors.StateUnavailableError`.

    ``get``, ``list``, ``cancel`` and ``answer`` are a reader's steps: they first make an active
    task whose lease expired ``failed`` (:data:`LOST_ERROR`). ``renew``, ``finish``, ``ask`` and
    ``take`` are the running replica's own steps on its live task: they never do (after a store
    outage longer than the lease the runner's task is renewed or finished, not lost), and each
    is idempotent (run twice it leaves what running it once does), so it may be retried."""

    async def create(self, task_id: str, owner: str, ttl_ms: int, poll_ms: int, lease_ms: int, max_per_owner: int) -> TaskRecord:
        """Write a new ``working`` record; :class:`~fastapi_mcp_ctx.errors.TaskQuotaExceededError`
        when ``owner`` holds ``max_per_owner`` unexpired tasks."""
        ...

    async def get(self, owner: str, task_id: str) -> TaskRecord | None:
        """The record, or None (unknown, expired, another owner's). An active record whose lease
        expired is first made ``failed`` with :data:`LOST_ERROR` (so by ``list``, ``cancel``, ``answer``)."""
        ...

    async def list(self, owner: str) -> list[TaskRecord]:
        """The owner's unexpired tasks, oldest first."""
        ...

    async def finish(self, owner: str, task_id: str, status: TaskStatus, message: str | None, payload: str | None) -> bool:
        """Make an active task terminal (its lease not checked): ``payload`` is the result
        (``completed``) or error (``failed``) JSON; its answers and pending requests are deleted.
        False (nothing changed) when it is terminal already or gone."""
        ...

    async def cancel(self, owner: str, task_id: str) -> bool | None:
        """``cancelled`` when active (True); False when terminal already; None when not found."""
        ...

    async def ask(self, owner: str, task_id: str, key: str, entry: str) -> bool:
        """Add pending input request ``key`` (JSON ``entry``); the task goes ``input_required``
        (nothing changes when ``key`` was answered already: a retry). False when the task is no
        longer active."""
        ...

    async def answer(self, owner: str, task_id: str, responses: Mapping[str, str]) -> list[str] | None:
        """Record the answers (JSON) of pending keys (others are ignored); the task goes back to
        ``working`` once none is pending. The keys taken, or None when the task is not found."""
        ...

    async def take(self, owner: str, task_id: str, key: str) -> str | None:
        """The answer (JSON) recorded for ``key``, or None; it stays until the task ends."""
        ...

    async def renew(self, owner: str, task_id: str, lease_ms: int, message: str | None = None) -> bool:
        """Extend the running replica's lease (and set ``statusMessage`` when given); False when
        the task is terminal (cancelled elsewhere) or gone: the runner stops."""
        ...
