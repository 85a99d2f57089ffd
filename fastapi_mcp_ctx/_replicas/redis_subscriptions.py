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

    async def subscribe(self, session: SessionAddress, uri: str) -> None:
        keys = [self._session + session.session_id, self._uri + uri]
        args = [uri, session.session_id, json.dumps(session.tenant_id), self.max_per_session, self.ttl_ms]
        if await self.link.eval(_WHAT, _SUBSCRIBE, keys, args) == -1:
            raise OverflowError(f"A session may subscribe to at most {self.max_per_session} resources")

    async def unsubscribe(self, session: SessionAddress, uri: str) -> bool:
        keys = [self._session + session.session_id, self._uri + uri]
        return await self.link.eval(_WHAT, _UNSUBSCRIBE, keys, [uri, session.session_id]) == 1

    async def subscribers(self, uri: str) -> list[SessionAddress]:
        found = cast("dict[str, str]", await self.link.call(_WHAT, "HGETALL", self._uri + uri))
        return [SessionAddress(json.loads(tenant), session_id) for session_id, tenant in sorted(found.items())]

    async def uris(self, session_id: str) -> list[str]:
        return cast("list[str]", await self.link.call(_WHAT, "ZRANGE", self._session + session_id, 0, -1))

    async def drop_session(self, session_id: str) -> None:
        await self.link.eval(_WHAT, _DROP, [self._session + session_id], [self._uri, session_id])
