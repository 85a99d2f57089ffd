"""Server→client requests awaiting the client's answer: one table per transport endpoint.

The task that sends a request reserves an id with :meth:`PendingRequests.open` (naming the
*scope* the answer must come from: the 2025 session id over HTTP, ``None`` on a stdio
connection), sends the request, then waits in :meth:`PendingRequests.wait`. The transport
hands every JSON-RPC response the client sends to :meth:`PendingRequests.resolve` with the
scope it arrived in. An answer resolves a waiter only when both match: the scope, and the id
with its JSON type (``"1"`` is not ``1``; spec 2025-11-25 ``basic`` §Requests), so an answer
posted in another session, a late one, a duplicate or one for an id never sent resolves
nothing. An entry leaves the table when its answer arrives, when the wait times out or is
cancelled, when its scope ends (:meth:`close_scope`: the session was deleted or expired) and
when the table closes, so nothing leaks (spec 2025-11-25 ``basic/lifecycle`` §Timeouts).

Ids. A table made without ``origin`` (one connection: stdio) numbers its requests 1, 2, 3…
A table made with ``origin`` (HTTP: the router's, with
:func:`~fastapi_mcp_ctx._transport.bus.replica_id`) issues string ids ``"<origin>:<n>"``: the
origin names the replica that waits, so that with several replicas behind a load balancer
(DESIGN.md decision 9) the replica that receives a POSTed answer knows where the waiter is
(:func:`origin_of`). The plan for a shared deployment, which needs nothing more from this
table:

1. ``origin`` is the replica's identity (``replica_id()``: random, made at first use and again
   after a fork); each replica subscribes to its own bus channel ``replica.<origin>``.
2. A replica receiving an answer checks the session as for every request (the shared
   ``SessionStore``: unknown → 404, another principal's → 404), then calls :meth:`resolve`
   with the session id as scope. When that returns False and :func:`origin_of` names another
   replica, it publishes ``{"scope": <session id>, "response": <the JSON-RPC response>}`` on
   that replica's channel and answers 202 either way (a publish nobody receives is logged at
   debug level, like an unknown id).
3. The waiting replica resolves the forwarded answer against its own table with the same
   scope and typed-id rule, so a forwarded answer runs at most once (a second delivery finds
   no waiter) and never crosses sessions; a forward the bus loses ends as a timeout, like any
   unanswered request.
4. A session ended on any replica is published once; each replica closes that scope.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from .._wire.jsonrpc import JsonRpcResponse, RequestId

__all__ = ["PendingRequests", "origin_of"]

_SEPARATOR = ":"


def origin_of(request_id: RequestId | None) -> str | None:
    """The origin named by a request id ``"<origin>:<n>"``; None for any other id (integers,
    strings of another shape): such an id is no table's with an origin."""
    if not isinstance(request_id, str):
        return None
    origin, separator, number = request_id.rpartition(_SEPARATOR)
    if not separator or not origin or not number.isdigit():
        return None
    return origin


@dataclass(slots=True)
class _Waiter:
    request_id: RequestId
    scope: str | None
    event: anyio.Event = field(default_factory=anyio.Event)
    response: JsonRpcResponse | None = None


class PendingRequests:
    """The pending-request table of one endpoint (a small map: id → waiter).

    Args:
        origin: when given, ids are strings ``"<origin()>:<n>"`` (``origin`` is called at each
            :meth:`open`, so an identity made again after a fork is used at once); when None,
            ids are the integers 1, 2, 3…
    """

    def __init__(self, origin: Callable[[], str] | None = None) -> None:
        self._origin = origin
        self._ids = itertools.count(1)
        self._waiters: dict[RequestId, _Waiter] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._waiters)

    def count(self, scope: str | None) -> int:
        """How many requests of ``scope`` are waiting for an answer."""
        return sum(1 for waiter in self._waiters.values() if waiter.scope == scope)

    def open(self, scope: str | None = None) -> RequestId:
        """Reserve a fresh request id whose answer must come from ``scope``; send the request
        with it, then :meth:`wait` (or :meth:`discard` when the send failed).

        Raises:
            anyio.ClosedResourceError: the table is closed (the endpoint is shutting down).
        """
        if self._closed:
            raise anyio.ClosedResourceError
        number = next(self._ids)
        request_id: RequestId = number if self._origin is None else f"{self._origin()}{_SEPARATOR}{number}"
        self._waiters[request_id] = _Waiter(request_id, scope)
        return request_id

    async def wait(self, request_id: RequestId, timeout: float) -> JsonRpcResponse:
        """The client's response to ``request_id``, within ``timeout`` seconds.

        The entry is removed however the wait ends (answer, timeout, cancellation, close).

        Raises:
            KeyError: ``request_id`` was not opened (or was already awaited or discarded).
            TimeoutError: no answer within ``timeout`` seconds.
            anyio.ClosedResourceError: the scope or the table was closed before the answer came.
        """
        waiter = self._waiters[request_id]
        try:
            with anyio.fail_after(timeout):
                await waiter.event.wait()
        finally:
            self._waiters.pop(request_id, None)
        if waiter.response is None:
            raise anyio.ClosedResourceError
        return waiter.response

    def discard(self, request_id: RequestId) -> None:
        """Forget ``request_id`` without waiting (its request could not be sent)."""
        self._waiters.pop(request_id, None)

    def resolve(self, response: JsonRpcResponse, scope: str | None = None) -> bool:
        """Deliver ``response``, received in ``scope``, to its waiter.

        Returns:
            False when no request with that id (of that JSON type) waits in that scope: the
            answer is late, duplicated, never asked for, or sent from another session.
        """
        request_id = response.id
        if request_id is None:
            return False
        waiter = self._waiters.get(request_id)
        if waiter is None or waiter.scope != scope or waiter.event.is_set():
            return False
        if type(waiter.request_id) is not type(request_id):  # a dict equates 1, 1.0 and True; ids never do
            return False
        waiter.response = response
        waiter.event.set()
        return True

    def close_scope(self, scope: str | None) -> int:
        """End every wait of ``scope`` (its session ended) with :class:`anyio.ClosedResourceError`.

        Returns:
            How many waiters were woken.
        """
        woken = 0
        for waiter in self._waiters.values():
            if waiter.scope == scope and not waiter.event.is_set():
                waiter.event.set()
                woken += 1
        return woken

    def close(self) -> None:
        """Wake every waiter with :class:`anyio.ClosedResourceError`; later :meth:`open` calls fail."""
        self._closed = True
        for waiter in self._waiters.values():
            waiter.event.set()
