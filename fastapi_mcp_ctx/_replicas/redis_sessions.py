"""2025 session records and GET-stream leases in Redis, shared by every replica.

Keys under the namespace ``<ns>`` (default ``mcp:``)::

    <ns>ses:<id>          HASH    r = the record's JSON, o = its owner ('' anonymous),
                                  g:<stream id> = 1 for each GET stream opened in the session;
                                  expires (PX) after ``idle_seconds`` without use
    <ns>ses.all           ZSET    every live session, scored by its expiry (ms, Redis clock)
    <ns>ses.own:<owner>   ZSET    the sessions of one owner, scored the same way
    <ns>lease:<id>        STRING  the token of the connection holding the GET stream (PX lease)

Every compound step is one Lua script (atomic, one round trip), timed by Redis's own clock
(``TIME``) so replicas with skewed clocks agree: ``create`` purges expired members of the
counting sets and refuses beyond ``max_sessions`` / the owner quota; ``get`` (the lookups of
concurrent requests auto-pipelined into one script call: :mod:`.autopipe`) reads and
refreshes the idle expiry (only once the expiry is ``min(idle / 20, 30 s)`` old, so most
lookups write nothing: no AOF write, no fsync); a lease holder's renewal refreshes it too, so a session whose GET
stream is open on any replica never expires (the memory store's "pinned" rule). A lease
expires ``lease_seconds`` after its holder stops renewing it (a replica killed with
``kill -9``): a reconnect is refused with 409 for at most that long.

Fails closed: every Redis failure raises :class:`~fastapi_mcp_ctx.errors.StateUnavailableError`
(503 + ``Retry-After``), never "unknown" (404) and never "valid".
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Final

from .._transport.sessions import OwnerQuotaExceeded, SessionRecord
from .link import RedisLink, Script

__all__ = ["RedisLeases", "RedisSessionStore"]

_WHAT: Final = "session store"

_NOW = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"

# KEYS: rec, all, own; ARGV: json, owner, idle_ms, max, max_owner ('' none), id
_CREATE = Script(
    _NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return -1 end
if ARGV[2] ~= '' and ARGV[5] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then return -2 end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return -3 end
redis.call('HSET', KEYS[1], 'r', ARGV[1], 'o', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local exp = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], exp, ARGV[6])
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[3], exp, ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return now
"""
)

# The idle refresh of a live record: locals rec, all, idle (ms), id, ownp (owner key prefix).
_TOUCH = (
    _NOW
    + """
local owner = redis.call('HGET', rec, 'o')
redis.call('PEXPIRE', rec, idle)
local exp = now + tonumber(idle)
redis.call('ZADD', all, 'XX', exp, id)
if owner and owner ~= '' then
  redis.call('ZADD', ownp .. owner, 'XX', exp, id)
  redis.call('PEXPIRE', ownp .. owner, idle)
end
"""
)

# The lookups of one batch (autopipe.KeyBatcher). KEYS[1]: all; KEYS[2..]: the records;
# ARGV: idle_ms, slack_ms, own prefix, length of the record keys' prefix. One answer per record:
# its JSON, or 0 when unknown. Writes (the refresh) only when a record's expiry is more than
# slack_ms old: most lookups are pure reads (no AOF write, no fsync).
_GET = Script(
    """
local all, idle, ownp, cut = KEYS[1], ARGV[1], ARGV[3], tonumber(ARGV[4]) + 1
local fresh = tonumber(idle) - tonumber(ARGV[2])
local out = {}
for i = 2, #KEYS do
  local rec = KEYS[i]
  local r = redis.call('HGET', rec, 'r')
  if not r then
    out[i - 1] = 0
  else
    out[i - 1] = r
    if redis.call('PTTL', rec) < fresh then
      local id = string.sub(rec, cut)
"""
    + _TOUCH
    + """    end
  end
end
return out
"""
)

_UPDATE = Script(
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[1])
return 1
"""
)

# KEYS: rec, all, lease; ARGV: id, own prefix
_DELETE = Script(
    """
local owner = redis.call('HGET', KEYS[1], 'o')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
if not owner then return 0 end
if owner ~= '' then redis.call('ZREM', ARGV[2] .. owner, ARGV[1]) end
redis.call('DEL', KEYS[1])
return 1
"""
)

# KEYS: lease, rec; ARGV: token, lease_ms, force ('1': a resume takes the stream over)
_ACQUIRE = Script(
    """
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
if ARGV[3] == '1' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0
"""
)

# KEYS: lease, rec, all; ARGV: token, lease_ms, idle_ms, id, own prefix
_RENEW = Script(
    """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local rec, all, idle, id, ownp = KEYS[2], KEYS[3], ARGV[3], ARGV[4], ARGV[5]
"""
    + _TOUCH
    + "return 1\n"
)

_RELEASE = Script(
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
)

_NOTE = Script(
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HSET', KEYS[1], ARGV[1], '1')
"""
)


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _record_json(record: SessionRecord) -> str:
    return json.dumps(
        {
            "v": record.protocol_version,
            "c": record.client_capabilities,
            "i": record.client_info,
            "l": record.log_level,
            "o": record.owner,
            "t": record.created_at,
        },
        separators=(",", ":"),
    )


def _record_of(session_id: str, raw: str) -> SessionRecord:
    data: dict[str, Any] = json.loads(raw)
    return SessionRecord(
        id=session_id,
        protocol_version=data["v"],
        client_capabilities=data.get("c") or {},
        client_info=data.get("i"),
        log_level=data.get("l"),
        owner=data.get("o"),
        created_at=data.get("t", 0.0),
    )


class _Keys:
    __slots__ = ("all", "lease", "own", "rec")

    def __init__(self, namespace: str) -> None:
        self.rec = f"{namespace}ses:"
        self.all = f"{namespace}ses.all"
        self.own = f"{namespace}ses.own:"
        self.lease = f"{namespace}lease:"


class RedisSessionStore:
    """A :class:`~fastapi_mcp_ctx._transport.sessions.SessionStore` in Redis (see the module docstring).

    Args:
        link: the Redis clients.
        idle_seconds: a session unused this long (seconds, on every replica) is gone (404).
        max_sessions: live sessions at most, counted across replicas (``OverflowError`` beyond).
        max_per_owner: live sessions of one owner at most (:class:`OwnerQuotaExceeded`); None: no quota.
    """

    shared = True

    def __init__(self, link: RedisLink, *, idle_seconds: float, max_sessions: int, max_per_owner: int | None = None) -> None:
        self.link = link
        self.idle_ms = _ms(idle_seconds)
        self.slack_ms = _ms(min(idle_seconds / 20, 30.0))  # the idle timer restarts at most this late
        self.max_sessions = max_sessions
        self.max_per_owner = max_per_owner
        self.keys = k = _Keys(link.namespace)
        self._lookups = link.batcher(_WHAT, _GET, fixed_key=k.all, argv=[self.idle_ms, self.slack_ms, k.own, len(k.rec)])

    async def create(self, record: SessionRecord) -> None:
        """Store a new record. Raises ``OverflowError`` (full), :class:`OwnerQuotaExceeded`,
        ``StateUnavailableError`` (Redis down)."""
        k = self.keys
        owner = record.owner or ""
        limit = "" if self.max_per_owner is None else str(self.max_per_owner)
        now = await self.link.eval(
            _WHAT,
            _CREATE,
            [k.rec + record.id, k.all, k.own + owner],
            [_record_json(record), owner, self.idle_ms, self.max_sessions, limit, record.id],
        )
        if now == -1:
            raise OverflowError("Too many open sessions")
        if now == -2 and record.owner is not None and self.max_per_owner is not None:
            raise OwnerQuotaExceeded(record.owner, self.max_per_owner)
        if now == -3:  # 128 random bits collided: never in practice, refuse rather than overwrite
            raise OverflowError("Session id collision")
        record.created_at = record.last_seen = int(now) / 1000

    async def get(self, session_id: str) -> SessionRecord | None:
        """The record (its idle expiry restarted on every replica), None when unknown or expired.

        Raises:
            StateUnavailableError: Redis cannot be reached (never None: fail closed).
        """
        raw = await self._lookups.run(self.keys.rec + session_id)  # with the other lookups of this moment
        return _record_of(session_id, raw) if isinstance(raw, str) else None

    async def update(self, record: SessionRecord) -> None:
        """Persist changed fields (``log_level``) of a live record; a gone one stays gone."""
        await self.link.eval(_WHAT, _UPDATE, [self.keys.rec + record.id], [_record_json(record)])

    async def delete(self, session_id: str) -> bool:
        """End a session (its lease too); False when it was unknown."""
        k = self.keys
        n = await self.link.eval(_WHAT, _DELETE, [k.rec + session_id, k.all, k.lease + session_id], [session_id, k.own])
        return n == 1

    async def ping(self) -> None:
        """Raise :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` when Redis is unreachable."""
        await self.link.ping()


class RedisLeases:
    """The one-GET-stream-per-session rule across replicas (see the module docstring).

    Args:
        store: the session store whose records the leases belong to.
        lease_seconds: a lease lives this long without renewal (the holder renews it every
            third of it while its connection is open).
    """

    shared = True

    def __init__(self, store: RedisSessionStore, *, lease_seconds: float) -> None:
        self.store = store
        self.link = store.link
        self.lease_seconds = lease_seconds
        self.lease_ms = _ms(lease_seconds)

    def token(self) -> str:
        """A fresh holder token (one per connection)."""
        return secrets.token_hex(8)

    async def acquire(self, session_id: str, token: str, *, force: bool = False) -> bool:
        """Take the session's GET lease for ``token``; False when another holder has it
        (``force``: a resume takes it over regardless)."""
        k = self.store.keys
        n = await self.link.eval(_WHAT, _ACQUIRE, [k.lease + session_id, k.rec + session_id], [token, self.lease_ms, "1" if force else ""])
        return n == 1

    async def renew(self, session_id: str, token: str) -> bool:
        """Extend ``token``'s lease and the session's idle expiry; False when the lease was lost."""
        k = self.store.keys
        n = await self.link.eval(
            _WHAT,
            _RENEW,
            [k.lease + session_id, k.rec + session_id, k.all],
            [token, self.lease_ms, self.store.idle_ms, session_id, k.own],
        )
        return n == 1

    async def release(self, session_id: str, token: str) -> None:
        """Give the lease up (only when ``token`` still holds it)."""
        await self.link.eval(_WHAT, _RELEASE, [self.store.keys.lease + session_id], [token])

    async def note_get_stream(self, session_id: str, stream_id: str) -> None:
        """Record that ``stream_id`` is a GET stream of the session (so any replica resuming it
        continues on the session's current GET stream once it is replayed)."""
        await self.link.eval(_WHAT, _NOTE, [self.store.keys.rec + session_id], [f"g:{stream_id}"])

    async def is_get_stream(self, session_id: str, stream_id: str) -> bool:
        """Whether ``stream_id`` was opened as a GET stream of the session (on any replica)."""
        return bool(await self.link.call(_WHAT, "HEXISTS", self.store.keys.rec + session_id, f"g:{stream_id}"))
