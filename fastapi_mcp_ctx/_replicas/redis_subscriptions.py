"""The 2025 ``resources/subscribe`` registry in Redis, shared by every replica: a
:class:`~fastapi_mcp_ctx._transport.subscriptions.ResourceSubscriptions`.

Keys under ``<ns>``::

    <ns>sub.s:<session id>   ZSET  the session's URIs, scored by when they were subscribed (Redis clock)
    <ns>sub.u:<uri>          HASH  session id → its tenant (JSON), every subscriber of the URI

Both expire ``ttl_seconds`` after the last subscription of the session (a session that idled
out without anyone calling :meth:`drop_session` leaves nothing behind for ever). A session
subscribed on replica A gets the updates published on replica B.
"""

from __future__ import annotations

import json
from typing import Final, cast

from .._transport.subscriptions import SessionAddress
from .link import RedisLink, Script

__all__ = ["RedisResourceSubscriptions"]

_WHAT: Final = "subscription registry"

# KEYS: session zset, uri hash; ARGV: uri, session id, tenant json, max, ttl_ms
_SUBSCRIBE = Script(
    """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
local t = redis.call('TIME')
redis.call('ZADD', KEYS[1], t[1] * 1000000 + t[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
"""
)

# KEYS: session zset, uri hash; ARGV: uri, session id
_UNSUBSCRIBE = Script(
    """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[2])
return 1
"""
)

# On a cluster the session's set and a URI's hash are on different slots: _CLAIM takes the
# session's place, then the URI's hash is written (HSET, idempotent); a drop reads the session's
# URIs and removes it from each hash, then deletes the set.
# KEYS: session zset; ARGV: uri, max, ttl_ms
_CLAIM = Script(
    """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return -1 end
local t = redis.call('TIME')
redis.call('ZADD', KEYS[1], t[1] * 1000000 + t[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
)

# KEYS: session zset; ARGV: uri hash prefix, session id
_DROP = Script(
    """
for _, uri in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  redis.call('HDEL', ARGV[1] .. uri, ARGV[2])
end
return redis.call('DEL', KEYS[1])
"""
)


class RedisResourceSubscriptions:
    """URI subscriptions per 2025 session, in Redis (see the module docstring).

    Args:
        link: the Redis clients.
        max_per_session: URIs one session may hold (``OverflowError`` beyond).
        ttl_seconds: how long a session's subscriptions outlive its last ``subscribe``.
    """

    def __init__(self, link: RedisLink, *, max_per_session: int = 1000, ttl_seconds: float = 3600.0) -> None:
        self.link = link
        self.max_per_session = max_per_session
        self.ttl_ms = max(1, round(ttl_seconds * 1000))
        self._session = f"{link.namespace}sub.s:"
        self._uri = f"{link.namespace}sub.u:"
        self._tag = link.target.tag
        self._cluster = link.target.sharded

    def _keys(self, session_id: str, uri: str) -> list[str]:
        return [self._session + self._tag(session_id), self._uri + self._tag(uri)]

    async def subscribe(self, session: SessionAddress, uri: str) -> None:
        keys = self._keys(session.session_id, uri)
        tenant = json.dumps(session.tenant_id)
        if self._cluster:
            done = await self.link.eval(_WHAT, _CLAIM, keys[:1], [uri, self.max_per_session, self.ttl_ms], idempotent=True)
            if done == 1:
                await self.link.call(_WHAT, "HSET", keys[1], session.session_id, tenant)
                await self.link.call(_WHAT, "PEXPIRE", keys[1], self.ttl_ms)
        else:
            args = [uri, session.session_id, tenant, self.max_per_session, self.ttl_ms]
            done = await self.link.eval(_WHAT, _SUBSCRIBE, keys, args, idempotent=True)
        if done == -1:
            raise OverflowError(f"A session may subscribe to at most {self.max_per_session} resources")

    async def unsubscribe(self, session: SessionAddress, uri: str) -> bool:
        keys = self._keys(session.session_id, uri)
        if self._cluster:
            if await self.link.call(_WHAT, "ZREM", keys[0], uri) == 0:
                return False
            await self.link.call(_WHAT, "HDEL", keys[1], session.session_id)
            return True
        return await self.link.eval(_WHAT, _UNSUBSCRIBE, keys, [uri, session.session_id], idempotent=True) == 1

    async def subscribers(self, uri: str) -> list[SessionAddress]:
        found = cast("dict[str, str]", await self.link.call(_WHAT, "HGETALL", self._uri + self._tag(uri)))
        return [SessionAddress(json.loads(tenant), session_id) for session_id, tenant in sorted(found.items())]

    async def uris(self, session_id: str) -> list[str]:
        return cast("list[str]", await self.link.call(_WHAT, "ZRANGE", self._session + self._tag(session_id), 0, -1))

    async def drop_session(self, session_id: str) -> None:
        key = self._session + self._tag(session_id)
        if self._cluster:
            for uri in await self.uris(session_id):
                await self.link.call(_WHAT, "HDEL", self._uri + self._tag(uri), session_id)
            await self.link.call(_WHAT, "DEL", key)
            return
        await self.link.eval(_WHAT, _DROP, [key], [self._uri, session_id], idempotent=True)
