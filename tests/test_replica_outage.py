"""A Redis outage under two replicas (known fault B02, issue 7 "Failure"): fail closed with a
retryable 503 + ``Retry-After``, never 404 and never "valid"; after Redis returns, the earlier
sessions work on both replicas, and the bus and listen delivery recover without a reconnect.

Runs against a Redis server of its own (``own_redis``), which it stops and starts.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from conftest import LEGACY, MODERN, Wire, asgi_exchange, modern_meta, open_client, rpc
from notify_app import frames, get_stream, listening, wait_frames
from own_redis import own_redis
from replica_app import two_replicas
from resume_wire import call_body, legacy_headers

pytestmark = pytest.mark.redis


async def initialize(app: Any) -> str:
    async with open_client(app) as client:
        return await Wire(client).initialize(LEGACY)


async def post(app: Any, body: bytes, headers: dict[str, str]) -> Any:
    async with open_client(app) as client:
        return await client.post("/mcp", content=body, headers=headers)


def assert_unavailable(response: Any) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    if response.content:
        error = response.json()["error"]
        assert error["data"]["reason"] == "backend_unavailable"
        assert "Traceback" not in response.text


async def wait_ready(router: Any, timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not (await router.ready())["ready"]:
            await anyio.sleep(0.1)


async def test_b02_an_outage_fails_closed_with_503_then_everything_recovers_without_a_reconnect() -> None:
    with own_redis() as redis:
        async with two_replicas(redis.url) as (app_a, router_a, app_b, router_b):
            session = await initialize(app_a)
            assert (await post(app_b, call_body("where", request_id=1, token=None), legacy_headers(session))).status_code == 200
            async with listening(app_b, "l", {"toolsListChanged": True}) as listen, get_stream(app_b, session) as stream:
                await anyio.sleep(0.2)
                redis.stop()

                for app in (app_a, app_b):
                    assert_unavailable(await post(app, call_body("where", request_id=2, token=None), legacy_headers(session)))
                    made_up = await post(app, call_body("where", request_id=3, token=None), legacy_headers("made-up-123"))
                    assert_unavailable(made_up)  # never 200 (the tool ran) and never 404
                    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
                    init = await post(app, json.dumps(rpc("initialize", params, 0)).encode(), legacy_headers(None))
                    assert_unavailable(init)
                    async with open_client(app) as client:
                        assert_unavailable(await client.delete("/mcp", headers=legacy_headers(session)))
                    headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LEGACY}
                    async with asgi_exchange(app, "GET", headers=headers) as get:
                        assert get.status == 503
                    # The 2026 era needs no stored state: it keeps working.
                    modern = rpc("tools/call", {"name": "where", "arguments": {}, "_meta": modern_meta()}, 4)
                    modern_headers = {
                        "content-type": "application/json",
                        "accept": "application/json, text/event-stream",
                        "mcp-protocol-version": MODERN,
                        "mcp-method": "tools/call",
                        "mcp-name": "where",
                    }
                    served = await post(app, json.dumps(modern).encode(), modern_headers)
                    assert served.status_code == 200, served.text
                report = await router_a.ready()
                assert report["ready"] is False
                assert report["checks"]["sessions"].startswith("unavailable")

                redis.start()
                await wait_ready(router_a)
                await wait_ready(router_b)
                for app in (app_a, app_b):  # the session made before the outage is still valid
                    response = await post(app, call_body("where", request_id=5, token=None), legacy_headers(session))
                    assert response.status_code == 200, response.text
                # The listen stream and the GET stream opened before the outage, on b, still receive.
                await router_a.notify_tools_list_changed()
                got = await wait_frames(listen, 2, 5.0)
                assert got[-1]["method"] == "notifications/tools/list_changed"
                assert (await wait_frames(stream, 1, 5.0))[-1]["method"] == "notifications/tools/list_changed"
                await anyio.sleep(0.3)
                assert [f.get("method") for f in frames(listen)].count("notifications/tools/list_changed") == 1


async def test_an_answer_to_a_server_request_during_an_outage_is_503_and_can_be_retried() -> None:
    with own_redis() as redis:
        async with two_replicas(redis.url) as (app_a, _, app_b, router_b):
            session = await initialize(app_a)
            from resume_wire import post_call

            async with post_call(app_a, session, "ask", {"method": "ping"}) as running:
                ping = next(m for m in await wait_frames(running, 1, 5.0) if m.get("method") == "ping")
                redis.stop()
                answer = json.dumps({"jsonrpc": "2.0", "id": ping["id"], "result": {}}).encode()
                assert_unavailable(await post(app_b, answer, legacy_headers(session)))
                redis.start()
                await wait_ready(router_b)
                accepted = await post(app_b, answer, legacy_headers(session))
                assert accepted.status_code == 202, accepted.text
                await running.wait_for(lambda ex: ex.finished.is_set(), 5.0)
            assert frames(running)[-1]["result"]["structuredContent"]["asked_from"] == "a"


async def test_a_bus_that_cannot_connect_answers_subscribers_at_once_not_at_its_timeout() -> None:
    """Every request of a replica whose Redis is down used to wait the whole subscribe timeout
    (3 s) before its 503; the supervisor's failed connection attempt now answers them."""
    from fastapi_mcp_ctx._replicas.link import RedisLink
    from fastapi_mcp_ctx._replicas.redis_bus import RedisBus
    from fastapi_mcp_ctx.errors import StateUnavailableError

    bus = RedisBus(RedisLink("redis://127.0.0.1:1/0", timeout=2.0), timeout=60.0)
    try:
        for _ in range(3):  # the first (no attempt made yet) and the later ones alike
            with anyio.fail_after(10):
                with pytest.raises(StateUnavailableError):
                    await bus.subscribe("some-channel", lambda message: None)
    finally:
        await bus.aclose()
