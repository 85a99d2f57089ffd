"""Task records in this process (``MCP_SESSION_STORE_URL=memory://``): one replica only.

Same rules as the Redis store (``records.TaskStore``), on ``clock`` (ms since the epoch; tests
give a controlled one): a record is deleted once ``created + ttl`` has passed, an owner holds at
most ``max_per_owner`` unexpired records, an active record whose lease passed reads ``failed``
(for readers; the running replica's own steps ``renew``, ``finish``, ``ask``, ``take`` never lapse
it), ``take`` reads an answer without removing it (answers end with the task).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from ..backends._per_process import served_workers
from ..errors import ConfigurationError, TaskQuotaExceededError
from .records import ACTIVE, LOST_ERROR, TaskRecord, TaskStatus, new_fields

__all__ = ["MemoryTaskStore", "wall_clock_ms"]


def wall_clock_ms() -> int:
    """Now, in integer milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class MemoryTaskStore:
    """:class:`~.records.TaskStore` in a dict (module docstring)."""

    def __init__(self, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.clock = clock
        self._records: dict[tuple[str, str], dict[str, str]] = {}

    def _purge(self, now: int) -> None:
        expired = [k for k, f in self._records.items() if int(f["created"]) + int(f["ttl"]) <= now]
        for key in expired:
            del self._records[key]

    def _live(self, owner: str, task_id: str, *, lapse: bool = True) -> dict[str, str] | None:
        """The record's fields, None once expired; ``lapse``: a reader, who ends an active task
        whose lease passed (the runner's own steps pass False)."""
        now = self.clock()
        fields = self._records.get((owner, task_id))
        if fields is None:
            return None
        if int(fields["created"]) + int(fields["ttl"]) <= now:
            del self._records[(owner, task_id)]
            return None
        if lapse and fields["status"] in ACTIVE and int(fields["lease"]) < now:  # its replica stopped renewing
            self._end(fields, "failed", None, LOST_ERROR, now)
        return fields

    @staticmethod
    def _end(fields: dict[str, str], status: str, message: str | None, payload: str | None, now: int) -> None:
        fields["status"] = status
        fields["updated"] = str(now)
        if message is not None:
            fields["msg"] = message
        if payload is not None:
            fields["result" if status == "completed" else "error"] = payload
        for name in [n for n in fields if n.startswith(("q:", "a:"))]:
            del fields[name]

    async def create(self, task_id: str, owner: str, ttl_ms: int, poll_ms: int, lease_ms: int, max_per_owner: int) -> TaskRecord:
        workers = served_workers()
        if workers > 1:  # a task made here would be unknown to the other workers' tasks/get
            raise ConfigurationError(
                f"Tasks are kept in this process's memory, but `serve --workers {workers}` runs {workers} processes: "
                "set MCP_SESSION_STORE_URL=redis://host:port/db so every worker (and replica) shares them"
            )
        now = self.clock()
        self._purge(now)
        if sum(1 for o, _ in self._records if o == owner) >= max_per_owner:
            raise TaskQuotaExceededError(
                f"Too many tasks for this caller: at most {max_per_owner} are kept (MCP_MAX_TASKS_PER_OWNER)"
            )
        fields = new_fields(owner, ttl_ms, poll_ms, now, lease_ms)
        self._records[(owner, task_id)] = fields
        return TaskRecord.from_fields(task_id, fields)

    async def get(self, owner: str, task_id: str) -> TaskRecord | None:
        fields = self._live(owner, task_id)
        return None if fields is None else TaskRecord.from_fields(task_id, fields)

    async def list(self, owner: str) -> list[TaskRecord]:
        self._purge(self.clock())
        ids = [task_id for o, task_id in self._records if o == owner]
        records = [r for r in [await self.get(owner, i) for i in ids] if r is not None]
        return sorted(records, key=lambda r: (r.created_ms, r.task_id))

    async def finish(self, owner: str, task_id: str, status: TaskStatus, message: str | None, payload: str | None) -> bool:
        fields = self._live(owner, task_id, lapse=False)
        if fields is None or fields["status"] not in ACTIVE:
            return False
        self._end(fields, status, message, payload, self.clock())
        return True

    async def cancel(self, owner: str, task_id: str) -> bool | None:
        fields = self._live(owner, task_id)
        if fields is None:
            return None
        if fields["status"] not in ACTIVE:
            return False
        self._end(fields, "cancelled", "The task was cancelled by the client", None, self.clock())
        return True

    async def ask(self, owner: str, task_id: str, key: str, entry: str) -> bool:
        fields = self._live(owner, task_id, lapse=False)
        if fields is None or fields["status"] not in ACTIVE:
            return False
        if f"a:{key}" in fields:  # asked again after the answer came (a retried step): no change
            return True
        fields[f"q:{key}"] = entry
        fields["status"] = "input_required"
        fields["updated"] = str(self.clock())
        return True

    async def answer(self, owner: str, task_id: str, responses: Mapping[str, str]) -> list[str] | None:
        fields = self._live(owner, task_id)
        if fields is None:
            return None
        taken = [key for key in responses if f"q:{key}" in fields]
        for key in taken:
            del fields[f"q:{key}"]
            fields[f"a:{key}"] = responses[key]
        if taken:
            fields["updated"] = str(self.clock())
            if fields["status"] == "input_required" and not any(n.startswith("q:") for n in fields):
                fields["status"] = "working"
        return taken

    async def take(self, owner: str, task_id: str, key: str) -> str | None:
        fields = self._live(owner, task_id, lapse=False)
        return None if fields is None else fields.get(f"a:{key}")

    async def renew(self, owner: str, task_id: str, lease_ms: int, message: str | None = None) -> bool:
        fields = self._live(owner, task_id, lapse=False)
        if fields is None or fields["status"] not in ACTIVE:
            return False
        now = self.clock()
        fields["lease"] = str(now + lease_ms)
        if message is not None:
            fields["msg"] = message
            fields["updated"] = str(now)
        return True
