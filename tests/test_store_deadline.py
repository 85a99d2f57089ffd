"""A stalled Redis (paused with SIGSTOP: it accepts connections and never answers) costs one
request ONE deadline (``MCP_SESSION_STORE_DEADLINE_SECONDS``) of session-store and bus work,
answered 503 + ``Retry-After``; once Redis resumes, everything works without a reconnect.

Before: a 2025 ``initialize`` waited the socket timeout twice (redis-py retries a timed-out
command once: ~4 s), and a fresh replica's first request added the bus subscription's wait.
Runs against a Redis server of its own (``own_redis``), which it pauses.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from conftest import LEGACY, Wire, asgi_exchange, open_client, rpc
from own_redis import OwnRedis, own_redis
from pydantic import ValidationError
from replica_app import two_replicas
from resume_wire import call_body, legacy_headers

from fastapi_mcp_ctx import McpSettings

pytestmark = pytest.mark.redis

DEADLINE = 0.5
INIT = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}


@contextmanager
def paused(redis: OwnRedis) -> Iterator[None]:
    assert redis.proc is not None
    redis.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        redis.proc.send_signal(signal.SIGCONT)


def assert_one_deadline(response: Any, started: float) -> None:
    took = time.monotonic() - started
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    error = response.json()["error"]
    assert error["code"] == -32603 and error["data"]["reason"] == "backend_unavailable"
    assert "MCP_SESSION_STORE_DEADLINE_SECONDS" in error["message"]
    assert DEADLINE * 0.8 <= took < DEADLINE + 0.6, took  # one deadline, not two socket timeouts (4 s)


async def test_a_paused_redis_answers_every_2025_request_with_one_503_within_the_deadline() -> None:
    with own_redis() as redis:
        async with two_replicas(redis.url, session_store_deadline_seconds=DEADLINE) as (app_a, _, app_b, _):
            async with open_client(app_a) as client:
                session = await Wire(client).initialize(LEGACY)
            with paused(redis):
                for app in (app_a, app_b):
                    async with open_client(app) as client:
                        started = time.monotonic()
                        body = json.dumps(rpc("initialize", INIT, 0)).encode()
                        assert_one_deadline(await client.post("/mcp", content=body, headers=legacy_headers(None)), started)
                        started = time.monotonic()
                        call = call_body("where", request_id=2, token=None)
                        assert_one_deadline(await client.post("/mcp", content=call, headers=legacy_headers(session)), started)
                        started = time.monotonic()
                        answer = json.dumps({"jsonrpc": "2.0", "id": "zz:1", "result": {}}).encode()
                        assert_one_deadline(await client.post("/mcp", content=answer, headers=legacy_headers(session)), started)
                        started = time.monotonic()
                        assert_one_deadline(await client.delete("/mcp", headers=legacy_headers(session)), started)
                    started = time.monotonic()
                    headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LEGACY}
                    async with asgi_exchange(app, "GET", headers=headers) as get:
                        assert get.status == 503
                    assert time.monotonic() - started < DEADLINE + 0.6
            # Resumed: the session made before the pause is served on both replicas, and a new
            # one can be made (the cancelled commands' connections were dropped, no stale reply read).
            for app in (app_a, app_b):
                async with open_client(app) as client:
                    response = await client.post("/mcp", content=call_body("where", request_id=5, token=None), headers=legacy_headers(session))
                    assert response.status_code == 200, response.text
                    assert await Wire(client).initialize(LEGACY)


async def test_a_fresh_replica_meeting_a_paused_redis_spends_one_deadline_on_bus_and_session_together() -> None:
    with own_redis() as redis:
        async with two_replicas(redis.url, session_store_deadline_seconds=DEADLINE) as (app_a, router_a, _, _):
            assert not router_a.relay.started
            with paused(redis):
                async with open_client(app_a) as client:
                    started = time.monotonic()
                    body = json.dumps(rpc("initialize", INIT, 0)).encode()
                    assert_one_deadline(await client.post("/mcp", content=body, headers=legacy_headers(None)), started)
            async with open_client(app_a) as client:  # resumed: the bus subscribes at this request
                assert await Wire(client).initialize(LEGACY)
            assert router_a.relay.started


@pytest.mark.parametrize("value", [0, 0.01, 61, float("inf"), float("nan")])
def test_the_deadline_setting_is_bounded(value: float) -> None:
    with pytest.raises(ValidationError, match="session_store_deadline_seconds"):
        McpSettings(session_store_deadline_seconds=value)
