"""Unit tests of the replica bus twin, the channel names, the replica identity and the 2025
resource subscription registry (DESIGN.md decision 9)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

import pytest

from fastapi_mcp_ctx._transport import bus as bus_module
from fastapi_mcp_ctx._transport.bus import EVENTS_CHANNEL, MemoryBus, MessageBus, replica_id, session_channel, session_prefix
from fastapi_mcp_ctx._transport.subscriptions import MemoryResourceSubscriptions, ResourceSubscriptions, SessionAddress


async def test_publish_reaches_each_subscriber_once_with_its_own_copy() -> None:
    bus = MemoryBus()
    assert isinstance(bus, MessageBus)
    got_a: list[dict[str, Any]] = []
    got_b: list[dict[str, Any]] = []
    await bus.subscribe("c", got_a.append)
    await bus.subscribe("c", got_b.append)
    message = {"method": "m", "params": {"n": 1}}
    assert await bus.publish("c", message) == 2
    assert got_a == got_b == [message]
    assert got_a[0] is not message and got_a[0] is not got_b[0]
    got_a[0]["params"]["n"] = 99
    assert got_b[0]["params"]["n"] == 1 and message["params"]["n"] == 1


async def test_publish_without_subscribers_is_zero_and_other_channels_are_untouched() -> None:
    bus = MemoryBus()
    seen: list[Any] = []
    await bus.subscribe("a", seen.append)
    assert await bus.publish("b", {"x": 1}) == 0
    assert seen == []


async def test_unsubscribe_is_immediate_and_idempotent() -> None:
    bus = MemoryBus()
    seen: list[Any] = []
    stop = await bus.subscribe("a", seen.append)
    keep = await bus.subscribe("a", seen.append)
    stop()
    stop()
    assert await bus.publish("a", {"x": 1}) == 1
    keep()
    assert await bus.channels("") == []
    assert await bus.publish("a", {"x": 2}) == 0


async def test_a_failing_handler_does_not_starve_the_others(caplog: pytest.LogCaptureFixture) -> None:
    bus = MemoryBus()
    seen: list[Any] = []

    def broken(message: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    await bus.subscribe("a", broken)
    await bus.subscribe("a", seen.append)
    with caplog.at_level(logging.ERROR, logger="fastapi_mcp_ctx"):
        assert await bus.publish("a", {"x": 1}) == 2
    assert seen == [{"x": 1}]
    assert "bus handler" in caplog.text


async def test_non_json_message_is_refused_before_delivery() -> None:
    bus = MemoryBus()
    seen: list[Any] = []
    await bus.subscribe("a", seen.append)
    with pytest.raises(TypeError, match="JSON-serializable"):
        await bus.publish("a", {"when": object()})
    assert seen == []


async def test_channels_lists_subscribed_names_by_prefix() -> None:
    bus = MemoryBus()
    for name in ("session.x.1", "session.x.2", "session.y.3", EVENTS_CHANNEL):
        await bus.subscribe(name, lambda m: None)
    assert await bus.channels("session.x.") == ["session.x.1", "session.x.2"]
    await bus.aclose()
    assert await bus.channels("") == []


@pytest.mark.parametrize("tenant", ["default", "acme", "a.b", "ünïcode", "", "~", None])
def test_session_channels_are_distinct_per_tenant_and_dot_free(tenant: str | None) -> None:
    prefix = session_prefix(tenant)
    assert session_channel(tenant, "abc") == prefix + "abc"
    key = prefix[len("session.") : -1]
    assert key and "." not in key and "*" not in key
    others = {session_prefix(t) for t in ["default", "acme", "a.b", "ünïcode", "", "~", None] if t != tenant}
    assert prefix not in others


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Python 3.12+: fork() in a process with threads
def test_replica_id_is_made_at_first_use_and_changes_after_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bus_module, "_replica", None)
    first = replica_id()
    assert len(first) == 16 and replica_id() == first
    read_end, write_end = os.pipe()
    pid = os.fork()  # a real fork: the child forgets the parent's identity (os.register_at_fork)
    if pid == 0:  # pragma: no cover - the child reports and leaves at once
        os.close(read_end)
        os.write(write_end, replica_id().encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        child = pipe.read().decode()
    os.waitpid(pid, 0)
    assert len(child) == 16 and child != first
    assert replica_id() == first  # the parent keeps its own


def test_importing_the_package_makes_no_replica_id() -> None:
    code = "import fastapi_mcp_ctx, fastapi_mcp_ctx._transport.bus as b; print(b._replica)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"


async def test_registry_subscribe_unsubscribe_and_lookup() -> None:
    registry = MemoryResourceSubscriptions()
    assert isinstance(registry, ResourceSubscriptions)
    a, b = SessionAddress("t1", "sa"), SessionAddress("t2", "sb")
    await registry.subscribe(a, "u://1")
    await registry.subscribe(a, "u://1")  # idempotent
    await registry.subscribe(a, "u://2")
    await registry.subscribe(b, "u://1")
    assert await registry.subscribers("u://1") == [a, b]
    assert await registry.uris("sa") == ["u://1", "u://2"]
    assert await registry.unsubscribe(a, "u://1") is True
    assert await registry.unsubscribe(a, "u://1") is False
    assert await registry.subscribers("u://1") == [b]
    await registry.drop_session("sb")
    await registry.drop_session("sb")
    assert await registry.subscribers("u://1") == []
    assert await registry.uris("sb") == []
    assert await registry.uris("sa") == ["u://2"]


async def test_registry_bounds_one_session() -> None:
    registry = MemoryResourceSubscriptions(max_per_session=2)
    a = SessionAddress("t", "s")
    await registry.subscribe(a, "u://1")
    await registry.subscribe(a, "u://2")
    with pytest.raises(OverflowError, match="at most 2"):
        await registry.subscribe(a, "u://3")
    await registry.subscribe(SessionAddress("t", "other"), "u://3")  # the limit is per session
    assert await registry.subscribers("u://3") == [SessionAddress("t", "other")]
