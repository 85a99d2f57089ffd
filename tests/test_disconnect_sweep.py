"""The disconnect watchers' shared timer (``_transport.streams._Sweep``): one per loop, started
watchers only for calls that outlive ``WATCH_AFTER``, nothing left behind once the loop is idle."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi_mcp_ctx._context.cancel_signal import CancelSignal
from fastapi_mcp_ctx._transport import streams
from fastapi_mcp_ctx._transport.streams import WATCH_AFTER, _DisconnectWatcher  # pyright: ignore[reportPrivateUsage]


async def test_a_long_call_is_watched_a_short_one_is_not_and_the_sweep_goes_away() -> None:
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()
    received: list[str] = []

    async def receive() -> dict[str, Any]:
        received.append("receive")
        await gone.wait()
        return {"type": "http.disconnect"}

    short_signal, long_signal = CancelSignal(), CancelSignal()
    short = _DisconnectWatcher(receive, short_signal, loop)
    long = _DisconnectWatcher(receive, long_signal, loop)
    sweeps = streams._SWEEPS  # pyright: ignore[reportPrivateUsage]
    assert loop in sweeps, "one sweep serves the loop while calls run"
    short.stop()  # a fast call: never watched
    for _ in range(1000):  # the long call's watcher starts on the second tick (polled: a busy machine delays ticks)
        if received:
            break
        await asyncio.sleep(WATCH_AFTER / 5)
    await asyncio.sleep(WATCH_AFTER * 2.5)  # and later ticks start no other watcher
    assert received == ["receive"], "only the call that outlived WATCH_AFTER gets a watcher task"
    gone.set()
    await asyncio.sleep(0.01)
    assert long_signal.reason == "disconnected"
    assert short_signal.reason is None
    long.stop()
    for _ in range(1000):  # the tick after the last call ended drops the sweep
        if loop not in sweeps:
            break
        await asyncio.sleep(WATCH_AFTER / 5)
    assert loop not in sweeps, "an idle loop keeps no sweep (no timer, no reference to the loop)"


async def test_off_asyncio_no_watcher_joins() -> None:
    async def receive() -> dict[str, Any]:
        raise AssertionError("never read")

    watcher = _DisconnectWatcher(receive, CancelSignal(), None)
    watcher.stop()
    assert asyncio.get_running_loop() not in streams._SWEEPS  # pyright: ignore[reportPrivateUsage]


def test_a_loop_closed_with_a_call_in_flight_is_forgotten() -> None:
    async def receive() -> dict[str, Any]:
        raise AssertionError("never read")

    other, third = asyncio.new_event_loop(), asyncio.new_event_loop()
    sweeps = streams._SWEEPS  # pyright: ignore[reportPrivateUsage]
    try:
        orphan = _DisconnectWatcher(receive, CancelSignal(), other)  # its loop closes before any tick
        other.close()
        assert other in sweeps
        fresh = _DisconnectWatcher(receive, CancelSignal(), third)  # a new sweep prunes closed loops
        assert other not in sweeps, "a closed loop (and the calls it held) is not kept for ever"
        fresh.stop()
        orphan.stop()
    finally:
        other.close()
        third.close()
        sweeps.pop(third, None)
