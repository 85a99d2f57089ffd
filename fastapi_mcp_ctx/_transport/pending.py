"""Server→client requests awaiting the client's answer, keyed by the id the server sent.

A transport that reads JSON-RPC responses from the client (stdio: response lines on stdin)
hands each one to :meth:`PendingRequests.resolve`; the task that sent the request waits in
:meth:`PendingRequests.wait`. An entry leaves the table when its answer arrives, when the
wait times out or is cancelled, and when the table is closed, so nothing leaks (spec
2025-11-25 ``basic/lifecycle`` §Timeouts). Ids are integers from 1, unique per table; a
response whose id is unknown (late, duplicated, never sent) is not ours and is refused.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import anyio

from .._jsonrpc import JsonRpcResponse, RequestId

__all__ = ["PendingRequests"]


@dataclass(slots=True)
class _Waiter:
    event: anyio.Event = field(default_factory=anyio.Event)
    response: JsonRpcResponse | None = None


class PendingRequests:
    """The pending-request table of one connection (a small map: id → waiter)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiters: dict[RequestId, _Waiter] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._waiters)

    def open(self) -> RequestId:
        """Reserve a fresh request id; send the request with it, then :meth:`wait`.

        Raises:
            anyio.ClosedResourceError: the connection is closing.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        request_id = next(self._ids)
        self._waiters[request_id] = _Waiter()
        return request_id

    async def wait(self, request_id: RequestId, timeout: float) -> JsonRpcResponse:
        """The client's response to ``request_id``, within ``timeout`` seconds.

        The entry is removed however the wait ends.

        Raises:
            KeyError: ``request_id`` was not opened (or was already awaited).
            TimeoutError: no answer within ``timeout`` seconds.
            anyio.ClosedResourceError: the table was closed before the answer came.
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

    def resolve(self, response: JsonRpcResponse) -> bool:
        """Deliver ``response`` to its waiter; False when no request with its id is pending."""
        if response.id is None:
            return False
        waiter = self._waiters.get(response.id)
        if waiter is None or waiter.event.is_set():
            return False
        waiter.response = response
        waiter.event.set()
        return True

    def close(self) -> None:
        """Wake every waiter with :class:`anyio.ClosedResourceError`; later :meth:`open` calls fail."""
        self._closed = True
        for waiter in self._waiters.values():
            waiter.event.set()
