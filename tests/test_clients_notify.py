"""The official ``mcp`` 2.3 client over real HTTP (uvicorn on 127.0.0.1) against change
notifications: 20 concurrent clients in each mode each receive only their own logs, progress
and notifications (issue 6's "done when"); ``Client.listen`` in 2026; the GET stream in 2025;
a graceful end of listen streams when the router closes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from fastapi import Depends, FastAPI
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
from serving import uvicorn_thread

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context
from fastapi_mcp_ctx._transport.subscriptions import SessionAddress

CLIENTS = 20


def notify_app() -> FastAPI:
    router = McpRouter(settings=McpSettings(server_name="notify-e2e", log_level="debug"), list_changed={"tools"}, resources_subscribe=True)

    @router.tool()
    async def work(tag: str, ctx: Context = Depends(mcp_context)) -> str:
        """Progress and a log tagged ``tag`` on this call's stream, then an update of ``note://<tag>``
        (2025: to this session only, through its subscription; 2026: to listen streams naming it)."""
        await ctx.report_progress(1, 3, f"{tag}:1")
        await ctx.log.info(f"{tag}:log")
        await anyio.sleep(0.01)
        await ctx.report_progress(2, 3, f"{tag}:2")
        if ctx.session_id is not None:
            await router.subscriptions.subscribe(SessionAddress(ctx.tenant_id, ctx.session_id), f"note://{tag}")
            await router.send_notification_to_session(ctx.session_id, "notifications/message", {"level": "info", "data": f"{tag}:direct"})
        await ctx.notify_resource_updated(f"note://{tag}")
        await ctx.report_progress(3, 3, f"{tag}:3")
        return tag

    @router.tool()
    async def stream_ready(ctx: Context = Depends(mcp_context)) -> bool:
        """Wait (≤ 30 s) until this 2025 session's GET stream is open."""
        with anyio.move_on_after(30):
            while ctx.session_id not in await router.active_sessions():
                await anyio.sleep(0.02)
            return True
        return False

    @router.tool()
    async def trigger_tool_change(ctx: Context = Depends(mcp_context)) -> str:
        """Announce a tool-list change."""
        await ctx.notify_tools_list_changed()
        return "changed"

    app = FastAPI()
    app.include_router(router)

    @app.post("/admin/close")
    async def close() -> dict[str, str]:
        await router.aclose(grace_seconds=2)
        return {"closed": "yes"}

    return app


def _serve(app: FastAPI) -> Iterator[str]:
    with uvicorn_thread(app, path="", lifespan="off") as url:
        yield url


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    yield from _serve(notify_app())


@pytest.fixture
def own_base_url() -> Iterator[str]:
    """A server of this test alone (the test closes its router)."""
    yield from _serve(notify_app())


class Seen:
    """Everything one client received."""

    def __init__(self) -> None:
        self.progress: list[str | None] = []
        self.logs: list[Any] = []
        self.updates: list[str] = []
        self.tool_changes = 0
        self.arrived = anyio.Event()

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params.data)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append(message)

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updates.append(message.params.uri)
            self.arrived.set()
        elif isinstance(message, types.ToolListChangedNotification):
            self.tool_changes += 1
            self.arrived.set()


class Barrier:
    """Every client waits here until all of them got this far (so each one's notifications
    were published while all the others were still connected and listening)."""

    def __init__(self, parties: int) -> None:
        self._left = parties
        self._all = anyio.Event()

    async def wait(self) -> None:
        self._left -= 1
        if self._left == 0:
            self._all.set()
        with anyio.fail_after(30):
            await self._all.wait()


async def run_clients(one: Callable[[int, Seen, Barrier], Awaitable[None]]) -> list[Seen]:
    """Run ``one(i, seen, barrier)`` for CLIENTS clients at once; returns what each one saw."""
    seen = [Seen() for _ in range(CLIENTS)]
    barrier = Barrier(CLIENTS)
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for i in range(CLIENTS):
                tg.start_soon(one, i, seen[i], barrier)
    return seen


async def test_twenty_legacy_clients_each_receive_only_their_own(base_url: str) -> None:
    async def one(i: int, s: Seen, barrier: Barrier) -> None:
        tag = f"c{i}"
        async with Client(f"{base_url}/mcp", mode="legacy", cache=None, logging_callback=s.on_log, message_handler=s.on_message) as client:
            assert (await client.call_tool("stream_ready", {})).structured_content == {"result": True}
            result = await client.call_tool("work", {"tag": tag}, progress_callback=s.on_progress)
            assert result.structured_content == {"result": tag}
            with anyio.fail_after(30):
                await s.arrived.wait()
            await barrier.wait()
            await anyio.sleep(0.2)  # anything misrouted would arrive now

    for i, s in enumerate(await run_clients(one)):
        tag = f"c{i}"
        assert s.progress == [f"{tag}:1", f"{tag}:2", f"{tag}:3"], (i, s.progress)
        assert sorted(map(str, s.logs)) == sorted([str({"message": f"{tag}:log"}), f"{tag}:direct"]), (i, s.logs)
        assert s.updates == [f"note://{tag}"], (i, s.updates)


async def test_twenty_modern_clients_each_receive_only_their_own(base_url: str) -> None:
    async def one(i: int, s: Seen, barrier: Barrier) -> None:
        tag = f"m{i}"
        async with Client(f"{base_url}/mcp", mode="2026-07-28", cache=None, log_level="debug", logging_callback=s.on_log) as client:
            async with client.listen(resource_subscriptions=[f"note://{tag}"]) as sub:
                assert sub.honored.resource_subscriptions == [f"note://{tag}"]
                result = await client.call_tool("work", {"tag": tag}, progress_callback=s.on_progress)
                assert result.structured_content == {"result": tag}
                await barrier.wait()
                with anyio.move_on_after(0.5):  # collect whatever arrives: it must all be ours
                    async for event in sub:
                        assert isinstance(event, ResourceUpdated), event
                        s.updates.append(event.uri)

    for i, s in enumerate(await run_clients(one)):
        tag = f"m{i}"
        assert s.progress == [f"{tag}:1", f"{tag}:2", f"{tag}:3"], (i, s.progress)
        assert s.logs == [{"message": f"{tag}:log"}], (i, s.logs)
        assert s.updates == [f"note://{tag}"], (i, s.updates)


async def test_modern_client_listen_gets_tool_list_changes(base_url: str) -> None:
    with anyio.fail_after(15):
        async with Client(f"{base_url}/mcp", mode="2026-07-28", cache=None) as client:
            assert client.server_capabilities is not None
            async with client.listen(tools_list_changed=True, prompts_list_changed=True) as sub:
                assert sub.honored.tools_list_changed is True
                assert not sub.honored.prompts_list_changed  # not declared by the server
                await client.call_tool("trigger_tool_change", {})
                event = await sub.__anext__()
    assert isinstance(event, ToolsListChanged)


async def test_legacy_client_gets_tool_list_changes_on_its_get_stream(base_url: str) -> None:
    seen = Seen()
    with anyio.fail_after(15):
        async with Client(f"{base_url}/mcp", mode="legacy", cache=None, message_handler=seen.on_message) as client:
            capabilities = client.server_capabilities
            assert capabilities is not None and capabilities.tools is not None and capabilities.tools.list_changed is True
            assert (await client.call_tool("stream_ready", {})).structured_content == {"result": True}
            await client.call_tool("trigger_tool_change", {})
            await seen.arrived.wait()
    assert seen.tool_changes == 1


async def test_router_close_ends_a_listening_client_gracefully(own_base_url: str) -> None:
    ended = anyio.Event()
    with anyio.fail_after(15):
        async with Client(f"{own_base_url}/mcp", mode="2026-07-28", cache=None) as client:
            async with client.listen(tools_list_changed=True) as sub:

                async def drain() -> None:
                    async for _ in sub:  # SubscriptionLost would propagate: only a graceful end stops cleanly
                        pass
                    ended.set()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(drain)
                    async with httpx.AsyncClient() as http:
                        assert (await http.post(f"{own_base_url}/admin/close")).json() == {"closed": "yes"}
                    await ended.wait()
