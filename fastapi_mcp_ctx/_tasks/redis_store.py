"""Task records in Redis (``MCP_SESSION_STORE_URL=redis://…``), shared by every replica.

Keys under the namespace ``<ns>`` (default ``mcp:``), ``<h>`` the owner's hash
(:func:`~.records.owner_hash`), one Redis Cluster hash tag per owner so every script below
touches one slot::

    <ns>task:{<h>}:<task id>   HASH   the record (``records`` module docstring); PX = its ttlMs
    <ns>tasks:{<h>}            ZSET   the owner's tasks scored by expiry (ms): the per-owner bound
                                      and 2025 ``tasks/list``

Every step is one Lua script on Redis's clock (``TIME``), so replicas with skewed clocks agree
on leases and expiry; a record is found only under its owner's tag, so another owner's task id is
simply absent. An ended task never changes again (spec: terminal states are final), so each
replica keeps the last ended records it read (:class:`_Ended`: at most 4096 of them and 16 MiB
of results, each until its ``createdAt + ttlMs`` on this replica's clock): polling a finished
task costs no Redis round trip. The record and its result are written before the caller is answered (the
``tools/call`` creating it, the end of the run); with Redis persistence (AOF ``everysec`` or
``always``) an acknowledged result survives a Redis restart. Failures raise
:class:`~fastapi_mcp_ctx.errors.StateUnavailableError` (503), never "not found".

Readers (``get``, ``cancel``, ``answer``, ``list``) lapse an active task whose lease expired
(``failed``, ``task_lost``); the running replica's own steps (``renew``, ``finish``, ``ask``,
``take``) never do: after an outage longer than the lease its live task is renewed or finished,
not lost. ``ask`` and ``take`` are idempotent (``take`` reads the answer, which ends with the
task), so the link retries them after a broken connection, as it does ``get`` and ``renew``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._replicas.link import RedisLink, Script
from ..errors import TaskQuotaExceededError
from .records import LOST_ERROR, TaskRecord, TaskStatus, owner_hash

__all__ = ["RedisTaskStore"]

_WHAT: Final = "task store"
_NONE: Final = "\x00"
"""ARGV of "no value" (a status message may be '')."""

_LIB = """
local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)
local rec = KEYS[1]
local function active(st) return st == 'working' or st == 'input_required' end
local function finish(status, msg, field, payload)
  redis.call('HSET', rec, 'status', status, 'updated', now)
  if msg ~= '\\0' then redis.call('HSET', rec, 'msg', msg) end
  if payload ~= '\\0' then redis.call('HSET', rec, field, payload) end
  for _, n in ipairs(redis.call('HKEYS', rec)) do
    local p = string.sub(n, 1, 2)
    if p == 'q:' or p == 'a:' then redis.call('HDEL', rec, n) end
  end
end
local function own() return redis.call('HGET', rec, 'status') end
local function lapse(lost)
  local st = own()
  if st and active(st) and tonumber(redis.call('HGET', rec, 'lease')) < now then
    finish('failed', '\\0', 'error', lost)
    return 'failed'
  end
  return st
end
"""

# KEYS: rec, index; ARGV: id, owner, ttl_ms, poll_ms, lease_ms, max
_CREATE = Script(
    _LIB
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then return -1 end
redis.call('HSET', rec, 'owner', ARGV[2], 'status', 'working', 'msg', '', 'created', now, 'updated', now,
  'ttl', ARGV[3], 'poll', ARGV[4], 'lease', now + tonumber(ARGV[5]))
redis.call('PEXPIRE', rec, ARGV[3])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return now
"""
)
# KEYS: rec; ARGV: lost error
_GET = Script(_LIB + "if not lapse(ARGV[1]) then return false end\nreturn redis.call('HGETALL', rec)\n")
# KEYS: rec; ARGV: status, msg, payload field, payload (the runner's own step: no lapse)
_FINISH = Script(
    _LIB + "local st = own()\nif not st or not active(st) then return 0 end\nfinish(ARGV[1], ARGV[2], ARGV[3], ARGV[4])\nreturn 1\n"
)
# KEYS: rec; ARGV: lost
_CANCEL = Script(
    _LIB
    + """
local st = lapse(ARGV[1])
if not st then return -1 end
if not active(st) then return 0 end
finish('cancelled', 'The task was cancelled by the client', 'error', '\\0')
return 1
"""
)
# KEYS: rec; ARGV: key, entry (the runner's own step: no lapse; again after the answer came: no change)
_ASK = Script(
    _LIB
    + """
local st = own()
if not st or not active(st) then return 0 end
if redis.call('HEXISTS', rec, 'a:' .. ARGV[1]) == 1 then return 1 end
redis.call('HSET', rec, 'q:' .. ARGV[1], ARGV[2], 'status', 'input_required', 'updated', now)
return 1
"""
)
# KEYS: rec; ARGV: lost, key1, answer1, key2, answer2...
_ANSWER = Script(
    _LIB
    + """
local st = lapse(ARGV[1])
if not st then return false end
local taken = {}
for i = 2, #ARGV, 2 do
  if redis.call('HDEL', rec, 'q:' .. ARGV[i]) == 1 then
    redis.call('HSET', rec, 'a:' .. ARGV[i], ARGV[i + 1])
    table.insert(taken, ARGV[i])
  end
end
if #taken > 0 then
  redis.call('HSET', rec, 'updated', now)
  if st == 'input_required' then
    local pending = false
    for _, n in ipairs(redis.call('HKEYS', rec)) do
      if string.sub(n, 1, 2) == 'q:' then pending = true break end
    end
    if not pending then redis.call('HSET', rec, 'status', 'working') end
  end
end
return taken
"""
)
# KEYS: rec; ARGV: key (read only: the answers are deleted when the task ends)
_TAKE = Script("return redis.call('HGET', KEYS[1], 'a:' .. ARGV[1])\n")
# KEYS: rec; ARGV: lease_ms, msg (the runner's own step: no lapse)
_RENEW = Script(
    _LIB
    + """
local st = own()
if not st or not active(st) then return 0 end
redis.call('HSET', rec, 'lease', now + tonumber(ARGV[1]))
if ARGV[2] ~= '\\0' then redis.call('HSET', rec, 'msg', ARGV[2], 'updated', now) end
return 1
"""
)
# KEYS: index
_LIVE = Script(
    "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\nreturn redis.call('ZRANGE', KEYS[1], 0, -1)\n"
)


class _Ended:
    """The ended records this replica read last, bounded in number and in bytes (module docstring)."""

    def __init__(self, max_records: int = 4096, max_bytes: int = 16 * 1024 * 1024) -> None:
        self._records: OrderedDict[tuple[str, str], tuple[int, int, TaskRecord]] = OrderedDict()
        self._max_records, self._max_bytes, self._bytes = max_records, max_bytes, 0

    def get(self, owner: str, task_id: str) -> TaskRecord | None:
        entry = self._records.get((owner, task_id))
        if entry is None:
            return None
        if entry[0] <= time.time() * 1000:  # its TTL elapsed: Redis deleted it too
            self._drop((owner, task_id))
            return None
        self._records.move_to_end((owner, task_id))
        return entry[2]

    def put(self, record: TaskRecord, size: int) -> None:
        key = (record.owner, record.task_id)
        if key in self._records or size > self._max_bytes // 16:
            return
        self._records[key] = (record.created_ms + record.ttl_ms, size, record)
        self._bytes += size
        while len(self._records) > self._max_records or self._bytes > self._max_bytes:
            self._drop(next(iter(self._records)))

    def _drop(self, key: tuple[str, str]) -> None:
        _, size, _ = self._records.pop(key)
        self._bytes -= size


def _pairs(flat: Sequence[Any]) -> dict[str, str]:
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}


class RedisTaskStore:
    """:class:`~.records.TaskStore` in Redis (module docstring), on the session store's link."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._ns = link.namespace
        self._ended = _Ended()

    def _rec(self, owner: str, task_id: str) -> str:
        return f"{self._ns}task:{{{owner_hash(owner)}}}:{task_id}"

    def _index(self, owner: str) -> str:
        return f"{self._ns}tasks:{{{owner_hash(owner)}}}"

    async def _run(self, script: Script, owner: str, task_id: str, *args: str | int, idempotent: bool) -> Any:
        """A reader's step: ``ARGV[1]`` is the error a lapsed lease writes."""
        return await self._link.eval(_WHAT, script, [self._rec(owner, task_id)], [LOST_ERROR, *args], idempotent=idempotent)

    async def _own(self, script: Script, owner: str, task_id: str, *args: str | int) -> Any:
        """The running replica's step on its task (no lapse; each one idempotent)."""
        return await self._link.eval(_WHAT, script, [self._rec(owner, task_id)], list(args), idempotent=True)

    async def create(self, task_id: str, owner: str, ttl_ms: int, poll_ms: int, lease_ms: int, max_per_owner: int) -> TaskRecord:
        now = await self._link.eval(
            _WHAT,
            _CREATE,
            [self._rec(owner, task_id), self._index(owner)],
            [task_id, owner, ttl_ms, poll_ms, lease_ms, max_per_owner],
            idempotent=False,
        )
        if int(now) < 0:
            raise TaskQuotaExceededError(
                f"Too many tasks for this caller: at most {max_per_owner} are kept (MCP_MAX_TASKS_PER_OWNER)"
            )
        return TaskRecord(task_id, owner, "working", int(now), int(now), ttl_ms, poll_ms)

    async def get(self, owner: str, task_id: str) -> TaskRecord | None:
        ended = self._ended.get(owner, task_id)
        if ended is not None:
            return ended
        flat = await self._run(_GET, owner, task_id, idempotent=True)
        if not flat:
            return None
        fields = _pairs(flat)
        if fields.get("owner") != owner:  # a hash collision across owners: still not theirs
            return None
        record = TaskRecord.from_fields(task_id, fields)
        if record.terminal:
            self._ended.put(record, sum(len(v) for v in fields.values()))
        return record

    async def list(self, owner: str) -> list[TaskRecord]:
        ids = await self._link.eval(_WHAT, _LIVE, [self._index(owner)], [], idempotent=True)
        records = [r for r in [await self.get(owner, str(i)) for i in ids or ()] if r is not None]
        return sorted(records, key=lambda r: (r.created_ms, r.task_id))

    async def finish(self, owner: str, task_id: str, status: TaskStatus, message: str | None, payload: str | None) -> bool:
        field = "result" if status == "completed" else "error"  # again once ended: no change, so idempotent
        done = await self._own(_FINISH, owner, task_id, status, _NONE if message is None else message, field, _NONE if payload is None else payload)
        return int(done) == 1

    async def cancel(self, owner: str, task_id: str) -> bool | None:
        done = int(await self._run(_CANCEL, owner, task_id, idempotent=False))
        return None if done < 0 else done == 1

    async def ask(self, owner: str, task_id: str, key: str, entry: str) -> bool:
        return int(await self._own(_ASK, owner, task_id, key, entry)) == 1

    async def answer(self, owner: str, task_id: str, responses: Mapping[str, str]) -> list[str] | None:
        args: list[str | int] = []
        for key, value in responses.items():
            args.extend((key, value))
        taken = await self._run(_ANSWER, owner, task_id, *args, idempotent=False)
        return None if taken is None else [str(k) for k in taken]

    async def take(self, owner: str, task_id: str, key: str) -> str | None:
        value = await self._own(_TAKE, owner, task_id, key)
        return None if value is None else str(value)

    async def renew(self, owner: str, task_id: str, lease_ms: int, message: str | None = None) -> bool:
        return int(await self._own(_RENEW, owner, task_id, lease_ms, _NONE if message is None else message)) == 1
