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

import contextlib
import json
import secrets
from collections.abc import Callable
from typing import Any, Final, cast

from redis.crc import key_slot
from redis.exceptions import RedisError

from .._transport.sessions import OwnerQuotaExceeded, SessionRecord
from ..errors import McpError
from . import session_scripts as lua
from .autopipe import KeyBatcher
from .link import RedisLink

__all__ = ["RedisLeases", "RedisSessionStore"]

_WHAT: Final = "session store"

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
    """The key names; on a cluster a session's keys share the hash tag ``{<id>}``, an owner's set ``{<owner>}``."""

    __slots__ = ("all", "lease", "own", "rec", "tag")

    def __init__(self, namespace: str, tag: Callable[[str], str]) -> None:
        self.tag = tag
        self.rec = f"{namespace}ses:"
        self.all = f"{namespace}ses.all"
        self.own = f"{namespace}ses.own:"
        self.lease = f"{namespace}lease:"

    def record(self, session_id: str) -> str:
        return self.rec + self.tag(session_id)

    def lease_of(self, session_id: str) -> str:
        return self.lease + self.tag(session_id)

    def owner(self, owner: str) -> str:
        return self.own + self.tag(owner)


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
        self.keys = k = _Keys(link.namespace, link.target.tag)
        self.cluster = link.target.sharded
        # one Redis: the lookups of concurrent requests in one script call; a cluster: one per lookup, on its slot
        self._lookups = (
            None if self.cluster else link.batcher(_WHAT, lua.GET, fixed_key=k.all, argv=[self.idle_ms, self.slack_ms, k.own, len(k.rec)])
        )
        self._by_master: dict[str, KeyBatcher] = {}  # a cluster: the lookups of each master

    async def create(self, record: SessionRecord) -> None:
        """Store a new record. Raises ``OverflowError`` (full), :class:`OwnerQuotaExceeded`,
        ``StateUnavailableError`` (Redis down)."""
        if self.cluster:
            return await self._create_split(record)
        k = self.keys
        owner = record.owner or ""
        limit = "" if self.max_per_owner is None else str(self.max_per_owner)
        now = await self.link.eval(
            _WHAT,
            lua.CREATE,
            [k.rec + record.id, k.all, k.own + owner],
            [_record_json(record), owner, self.idle_ms, self.max_sessions, limit, record.id],
            idempotent=False,
        )
        self._created(record, int(now))

    def _created(self, record: SessionRecord, now: int) -> None:
        if now == -1:
            raise OverflowError("Too many open sessions")
        if now == -2 and record.owner is not None and self.max_per_owner is not None:
            raise OwnerQuotaExceeded(record.owner, self.max_per_owner)
        if now == -3:  # 128 random bits collided: never in practice, refuse rather than overwrite
            raise OverflowError("Session id collision")
        record.created_at = record.last_seen = now / 1000

    async def _create_split(self, record: SessionRecord) -> None:
        """:meth:`create` on a cluster: reserve a place in each counting set, then write the record."""
        k, owner, sid = self.keys, record.owner or "", record.id
        now = int(await self.link.eval(_WHAT, lua.RESERVE, [k.all], [self.max_sessions, self.idle_ms, sid, ""], idempotent=True))
        if now < 0:
            return self._created(record, -1)
        taken = [k.all]
        try:
            if owner:
                limit = "" if self.max_per_owner is None else self.max_per_owner
                mine = int(await self.link.eval(_WHAT, lua.RESERVE, [k.owner(owner)], [limit, self.idle_ms, sid, "1"], idempotent=True))
                if mine < 0:
                    await self._unreserve(taken, sid)
                    return self._created(record, -2)
                taken.append(k.owner(owner))
            done = int(
                await self.link.eval(_WHAT, lua.CREATE_ONE, [k.record(sid)], [_record_json(record), owner, self.idle_ms], idempotent=False)
            )
        except McpError:
            await self._unreserve(taken, sid)
            raise
        if done < 0:
            await self._unreserve(taken, sid)
        self._created(record, done if done < 0 else now)

    async def _unreserve(self, sets: list[str], session_id: str) -> None:
        for key in sets:  # best effort: an entry left behind expires with its score
            with contextlib.suppress(McpError):
                await self.link.call(_WHAT, "ZREM", key, session_id)

    async def bump(self, session_id: str, owner: str, now: int) -> None:
        """On a cluster, after a refresh of the record: the counting sets' entries, best effort."""
        score = now + self.idle_ms
        sets = [(self.keys.all, "")] + ([(self.keys.owner(owner), "1")] if owner else [])
        for key, expire in sets:
            with contextlib.suppress(McpError):
                await self.link.eval(_WHAT, lua.BUMP, [key], [score, session_id, self.idle_ms, expire], idempotent=True)

    async def get(self, session_id: str) -> SessionRecord | None:
        """The record (its idle expiry restarted on every replica), None when unknown or expired.

        Raises:
            StateUnavailableError: Redis cannot be reached (never None: fail closed).
        """
        if self._lookups is not None:
            raw = await self._lookups.run(self.keys.rec + session_id)  # with the other lookups of this moment
            return _record_of(session_id, raw) if isinstance(raw, str) else None
        found = cast("list[Any]", await self._lookup_on_its_master(session_id))
        raw, owner, now = found
        if int(now or 0):
            await self.bump(session_id, str(owner), int(now))
        return _record_of(session_id, raw) if isinstance(raw, str) else None

    async def _lookup_on_its_master(self, session_id: str) -> Any:
        """On a cluster: ``lua.GET_ONE`` of the record, with the other lookups of this moment that
        go to the same master (pipelined on a connection of its own: :mod:`.autopipe`). A
        redirect (``MOVED`` after a failover), an error reply or a broken connection sends it
        once more through the cluster client, which follows the redirect and reloads its slot map."""
        key = self.keys.record(session_id)
        cluster: Any = self.link.commands().redis
        try:
            node = cluster.nodes_manager.get_node_from_slot(key_slot(session_id.encode()))
        except Exception:  # noqa: BLE001 - no slot map yet (first use) or the slot is not covered
            node = None
        if node is not None:
            batcher = self._by_master.get(node.name)
            if batcher is None:
                batcher = self._by_master[node.name] = self.link.batcher(
                    _WHAT, lua.GET_ONE, fixed_key="", argv=[self.idle_ms, self.slack_ms], node=(node.host, int(node.port))
                )
            try:
                return await batcher.run(key)
            except (RedisError, McpError):
                cluster._initialize = True  # the slot map may be stale: the cluster client reloads it
        return await self.link.eval(_WHAT, lua.GET_ONE, [key], [self.idle_ms, self.slack_ms], idempotent=True)

    async def update(self, record: SessionRecord) -> None:
        """Persist changed fields (``log_level``) of a live record; a gone one stays gone."""
        await self.link.eval(_WHAT, lua.UPDATE, [self.keys.record(record.id)], [_record_json(record)], idempotent=True)

    async def delete(self, session_id: str) -> bool:
        """End a session (its lease too); False when it was unknown."""
        k = self.keys
        if not self.cluster:
            n = await self.link.eval(
                _WHAT, lua.DELETE, [k.rec + session_id, k.all, k.lease + session_id], [session_id, k.own], idempotent=True
            )
            return n == 1
        found = await self.link.eval(_WHAT, lua.DELETE_ONE, [k.record(session_id), k.lease_of(session_id)], [], idempotent=True)
        if not isinstance(found, list):
            return False
        owner = str(cast("list[Any]", found)[1])
        await self._unreserve([k.all, *([k.owner(owner)] if owner else [])], session_id)
        return True

    async def ping(self) -> None:
        """Raise :class:`~fastapi_mcp_ctx.errors.StateUnavailableError` when Redis is unreachable."""
        await self.link.ping()

    async def check(self) -> None:
        """For ``router.check()``: :meth:`ping`, and a ``ConfigurationError`` when a
        ``redis://`` URL names a node of a Redis Cluster (use ``redis+cluster://``)."""
        await self.link.check()


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
        keys = [k.lease_of(session_id), k.record(session_id)]
        return await self.link.eval(_WHAT, lua.ACQUIRE, keys, [token, self.lease_ms, "1" if force else ""], idempotent=True) == 1

    async def renew(self, session_id: str, token: str) -> bool:
        """Extend ``token``'s lease and the session's idle expiry; False when the lease was lost."""
        k = self.store.keys
        if self.store.cluster:
            found = await self.link.eval(
                _WHAT, lua.RENEW_ONE, [k.lease_of(session_id), k.record(session_id)], [token, self.lease_ms, self.store.idle_ms], idempotent=True
            )
            if not isinstance(found, list):
                return False
            _, owner, now = cast("list[Any]", found)
            await self.store.bump(session_id, str(owner), int(now))
            return True
        n = await self.link.eval(
            _WHAT,
            lua.RENEW,
            [k.lease + session_id, k.rec + session_id, k.all],
            [token, self.lease_ms, self.store.idle_ms, session_id, k.own],
            idempotent=True,
        )
        return n == 1

    async def release(self, session_id: str, token: str) -> None:
        """Give the lease up (only when ``token`` still holds it)."""
        await self.link.eval(_WHAT, lua.RELEASE, [self.store.keys.lease_of(session_id)], [token], idempotent=True)

    async def note_get_stream(self, session_id: str, stream_id: str) -> None:
        """Record that ``stream_id`` is a GET stream of the session (so any replica resuming it
        continues on the session's current GET stream once it is replayed)."""
        await self.link.eval(_WHAT, lua.NOTE, [self.store.keys.record(session_id)], [f"g:{stream_id}"], idempotent=True)

    async def is_get_stream(self, session_id: str, stream_id: str) -> bool:
        """Whether ``stream_id`` was opened as a GET stream of the session (on any replica)."""
        return bool(await self.link.call(_WHAT, "HEXISTS", self.store.keys.record(session_id), f"g:{stream_id}"))
