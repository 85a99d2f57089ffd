"""ASGI servers other than uvicorn: an awaitable that is not a coroutine.

Granian's ``receive()`` returns its own awaitable (``PyFutureAwaitable``) whose ``__await__`` is a
plain iterator: ``__next__`` only, no ``send``, no ``throw``. The body read's first step
(``_server/first_step.py``) once called ``send`` on it: every POST was a 500 under Granian. It now
steps any awaitable as ``await`` does, ready or waiting, a cancellation included.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conftest import make_router
from fastapi import FastAPI

from fastapi_mcp_ctx._server.first_step import first_step


class ServerAwaitable:
    """An awaitable as Granian's ``receive()`` gives: ``__await__`` returns an iterator that has
    ``__next__`` only; it yields ``future`` until it is done, then returns ``value``."""

    def __init__(self, value: Any, future: asyncio.Future[None] | None = None) -> None:
        self._value = value
        self._future = future

    def __await__(self) -> ServerAwaitable:
        return self

    def __iter__(self) -> ServerAwaitable:
        return self

    def __next__(self) -> Any:
        future = self._future
        if future is not None and not future.done():
            future._asyncio_future_blocking = True  # what Future.__await__ sets before yielding itself
            return future
        raise StopIteration(self._value)


def _app() -> FastAPI:
    router = make_router(session_mode="stateless")

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    app = FastAPI()
    app.include_router(router)
    return app


@pytest.mark.parametrize("waits", [False, True], ids=["body ready", "body waited for"])
async def test_a_post_is_served_when_receive_returns_a_plain_iterator_awaitable(waits: bool) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}).encode()
    loop = asyncio.get_running_loop()

    def receive() -> ServerAwaitable:
        future: asyncio.Future[None] | None = None
        if waits:
            future = loop.create_future()
            loop.call_later(0.01, future.set_result, None)
        return ServerAwaitable({"type": "http.request", "body": body, "more_body": False}, future)

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"accept", b"application/json, text/event-stream"), (b"mcp-protocol-version", b"2025-11-25")],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80), "state": {},
    }  # fmt: skip
    app = _app()
    for _ in range(2):  # the first request installs the router's claim, the second goes through it
        sent.clear()
        await app(dict(scope), receive, send)  # pyright: ignore[reportArgumentType]
        assert sent[0]["status"] == 200, sent
        answer = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
        assert answer["id"] == 7 and answer["result"]["structuredContent"] == {"result": 5}


async def test_first_step_of_a_plain_iterator_awaitable_gives_ready_results_and_waits() -> None:
    assert first_step(ServerAwaitable("now")) == ("now", None)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    result, rest = first_step(ServerAwaitable("later", future))
    assert result is None and rest is not None
    loop.call_later(0.01, future.set_result, None)
    assert await rest == "later"


async def _awaited(rest: Any) -> Any:
    return await rest


async def test_a_cancelled_wait_on_a_plain_iterator_awaitable_raises_in_the_task() -> None:
    loop = asyncio.get_running_loop()
    _, rest = first_step(ServerAwaitable("never", loop.create_future()))
    task = loop.create_task(_awaited(rest))
    loop.call_later(0.01, task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
