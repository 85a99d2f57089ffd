"""Change notifications on stdio (a real server process, tests/stdio_notify_app.py): 2025 list
changes, resource updates to subscribers and send_notification_to_session on stdout; 2026
subscriptions/listen acknowledged, tagged, filtered, cancelled unanswered, and answered
``complete`` when the session ends."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import rpc
from replica_app import redis_url
from stdio_wire import envelope, notification, server_env, spawn

APP = "stdio_notify_app:app"
SUB = "io.modelcontextprotocol/subscriptionId"


async def _until_answer(server: Any, request_id: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The notifications that arrive before the answer to ``request_id``, and the answer."""
    before: list[dict[str, Any]] = []
    while True:
        message = await server.recv()
        if message.get("id") == request_id and "method" not in message:
            return before, message
        before.append(message)


def _env(store: str) -> dict[str, str]:
    """The server's environment: embedded defaults, or its sessions and events on the test Redis
    (a replica's stores: a message to a session goes to the shared event store first, and a
    stdio session, which the store keeps no GET stream of, must still get it)."""
    if store == "memory":
        return server_env()
    return server_env(
        MCP_SESSION_STORE_URL=redis_url(),
        MCP_SESSION_STORE_NAMESPACE=f"t{uuid.uuid4().hex[:10]}:",
        MCP_REQUEST_STATE_KEY=secrets.token_urlsafe(32),
    )


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def test_2025_list_changes_updates_and_session_notifications_reach_stdout(tmp_path: Path, store: str) -> None:
    async with spawn(tmp_path, app=APP, env=_env(store)) as server:
        init = await server.initialize()
        assert init["capabilities"]["tools"] == {"listChanged": True}
        assert init["capabilities"]["resources"]["subscribe"] is True
        assert "error" not in await server.request("resources/subscribe", {"uri": "notes://a"}, 1)
        await server.send(rpc("tools/call", {"name": "add_tool", "arguments": {}}, 2))
        before, answer = await _until_answer(server, 2)
        messages = [*before]
        if not any(m.get("method") == "notifications/tools/list_changed" for m in messages):
            messages.append(await server.recv())  # the feed may follow the answer: it is another channel
        assert messages == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]  # nothing internal (the broadcast log's mark)
        assert answer["result"]["structuredContent"] == {"result": "published"}
        for uri, request_id in (("notes://b", 3), ("notes://a", 4)):  # only the subscribed URI is sent
            await server.send(rpc("tools/call", {"name": "touch", "arguments": {"uri": uri}}, request_id))
            before, _ = await _until_answer(server, request_id)
            updates = [m for m in before if m.get("method") == "notifications/resources/updated"]
            if uri == "notes://a" and not updates:
                updates = [await server.recv()]
            assert [u["params"] for u in updates] == ([{"uri": "notes://a"}] if uri == "notes://a" else [])
        await server.send(rpc("tools/call", {"name": "poke", "arguments": {"text": "hello"}}, 5))
        before, answer = await _until_answer(server, 5)
        assert answer["result"]["structuredContent"] == {"result": True}
        pokes = [m for m in before if m.get("method") == "notifications/message"] or [await server.recv()]
        assert pokes[0]["params"] == {"level": "info", "data": "hello"}
        await server.close_stdin()
        assert await server.wait() == 0


async def test_2026_listen_on_stdio_is_acknowledged_tagged_filtered_and_completed_at_the_end(tmp_path: Path) -> None:
    async with spawn(tmp_path, app=APP) as server:
        listen = {"notifications": {"toolsListChanged": True, "promptsListChanged": True}, "_meta": envelope()}
        await server.send(rpc("subscriptions/listen", listen, "sub-1"))
        ack = await server.recv()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"][SUB] == "sub-1"
        assert ack["params"]["notifications"] == {"toolsListChanged": True}  # prompts were not declared
        await server.send(rpc("tools/call", {"name": "add_tool", "arguments": {}, "_meta": envelope(progressToken="p")}, 2))
        before, answer = await _until_answer(server, 2)
        changes = [m for m in before if m.get("method") == "notifications/tools/list_changed"] or [await server.recv()]
        assert changes[0]["params"]["_meta"][SUB] == "sub-1"  # same JSON type as the listen id
        assert answer["result"]["structuredContent"] == {"result": "published"}
        assert not [m for m in before if m.get("method") == "notifications/progress" and SUB in m["params"].get("_meta", {})]
        await server.send(rpc("tools/call", {"name": "touch", "arguments": {"uri": "notes://x"}, "_meta": envelope()}, 3))
        before, _ = await _until_answer(server, 3)
        assert not [m for m in before if m.get("method") == "notifications/resources/updated"]  # not asked for
        await server.expect_silence(0.2)
        await server.close_stdin()
        rest = await server.rest_of_stdout()
        assert rest == [{"jsonrpc": "2.0", "id": "sub-1", "result": {"resultType": "complete", "_meta": {SUB: "sub-1"}}}]
        assert await server.wait() == 0


async def test_2026_listen_cancelled_is_never_answered_and_bad_filters_are_errors(tmp_path: Path) -> None:
    async with spawn(tmp_path, app=APP) as server:
        await server.send(rpc("subscriptions/listen", {"notifications": {"toolsListChanged": True}, "_meta": envelope()}, 7))
        assert (await server.recv())["method"] == "notifications/subscriptions/acknowledged"
        await server.send(notification("notifications/cancelled", {"requestId": 7, "_meta": envelope()}))
        await server.expect_silence(0.3)
        bad = await server.request("subscriptions/listen", {"notifications": "everything", "_meta": envelope()}, 8)
        assert bad["error"]["code"] == -32602
        await server.send(rpc("tools/call", {"name": "add_tool", "arguments": {}, "_meta": envelope()}, 9))
        before, _ = await _until_answer(server, 9)
        assert before == []  # the cancelled listen gets nothing more
        await server.expect_silence(0.2)
        await server.close_stdin()
        assert await server.rest_of_stdout() == []
        assert await server.wait() == 0
