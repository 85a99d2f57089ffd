"""Replica defects found by a hostile fault run (2026-12-01) (two in-process replicas on one Redis)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from conftest import LEGACY, Wire, asgi_exchange, open_client, sse_events
from notify_app import frames, get_stream
from replica_app import two_replicas
from resume_wire import post_call

pytestmark = pytest.mark.redis


def ids_of(exchange: Any) -> list[str]:
    return [e["id"] for e in sse_events(exchange.body.decode()) if e.get("data")]


async def test_resuming_a_call_stream_does_not_free_the_sessions_get_stream_lease() -> None:
    """The session's GET lease (one standalone GET stream per session, across replicas: a second
    GET is 409 while the first is open) is force-taken by *every* resume
    (``ResumableStreams.get``: ``acquire(..., force=True)``), a resume of a POST call's stream
    too, and deleted when that resume ends. a's open GET stream then holds no lease (its
    renewals fail silently), so the next plain GET on b is admitted (200) and takes the stream
    over, ending a's. Without the call resume the same GET is 409. Expected: 409 either way
    (a call-stream resume does not touch the GET lease)."""
    async with two_replicas() as (app_a, _, app_b, _):
        async with open_client(app_a) as client:
            session = await Wire(client).initialize(LEGACY)
        headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LEGACY}
        async with get_stream(app_a, session):
            async with asgi_exchange(app_b, "GET", headers=headers) as before:
                assert before.status == 409  # the lease works
            async with post_call(app_a, session, "slow", {"steps": 2, "delay": 0.05}) as running:
                await running.wait_for(lambda ex: ex.finished.is_set(), 5.0)
                first = ids_of(running)[0]
            async with asgi_exchange(app_b, "GET", headers={**headers, "last-event-id": first}) as resumed:
                assert resumed.status == 200, resumed.body
                await resumed.wait_for(lambda ex: ex.finished.is_set(), 5.0)
            assert frames(resumed)[-1]["result"]["content"][0]["text"] == "a done"
            await anyio.sleep(0.2)
            async with asgi_exchange(app_b, "GET", headers=headers) as second:
                assert second.status == 409, "a second standalone GET stream was opened while a's is open"


async def test_resuming_the_get_stream_on_another_replica_takes_its_lease_over() -> None:
    """The other side of the rule: a resume of the session's GET stream (not a call's) takes the
    stream and its lease over, so while the resumed connection on b is open a plain GET on a is
    409, and once it ends the lease is free again (a plain GET on a is 200)."""
    async with two_replicas() as (app_a, _, app_b, _):
        async with open_client(app_a) as client:
            session = await Wire(client).initialize(LEGACY)
        headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LEGACY}
        async with get_stream(app_a, session) as listening:
            await listening.wait_for(lambda ex: any(e.get("id") for e in sse_events(ex.body.decode())), 5.0)
            priming = next(e["id"] for e in sse_events(listening.body.decode()) if e.get("id"))
        async with asgi_exchange(app_b, "GET", headers={**headers, "last-event-id": priming}) as resumed:
            assert resumed.status == 200, resumed.body
            async with asgi_exchange(app_a, "GET", headers=headers) as second:
                assert second.status == 409, "a second standalone GET stream was opened while b's resumed one is open"
        async with get_stream(app_a, session) as reopened:
            assert reopened.status == 200
