"""The disconnect watchers of running calls share one timer per event loop (``_streams._Sweep``).

A call still running after one full tick gets its watcher task (a disconnect then cancels it);
a call that ends first leaves nothing behind: no set entry, no task, and the loop's timer stops
while no call runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi_mcp_ctx import _streams
from fastapi_mcp_ctx._streams import _WATCH_AFTER, _DisconnectWatcher  # pyright: ignore[reportPrivateUsage]
from fastapi_mcp_ctx.context import CancelSignal


def _receiver(disconnected: asyncio.Event) -> Any:
    async def receive() -> dict[str, Any]:
        await disconnected.wait()
        return {"type": "http.disconnect"}

    return receive


async def test_a_fast_call_leaves_no_entry_and_the_timer_stops() -> None:
    signals = [CancelSignal() for _ in range(50)]
    watchers = [_DisconnectWatcher(_receiver(asyncio.Event()), signal) for signal in signals]
    sweep = _streams._sweep  # pyright: ignore[reportPrivateUsage]
    assert sweep is not None and sweep.loop is asyncio.get_running_loop()
    assert len(sweep.young) == 50 and sweep.armed
    for watcher in watchers:
        watcher.stop()
    assert not sweep.young and not sweep.old
    await asyncio.sleep(_WATCH_AFTER * 2.5)  # two ticks: the first finds nothing, the timer stops
    assert not sweep.armed
    assert not any(signal.cancelled for signal in signals)


async def test_a_call_running_past_a_tick_is_watched_and_a_disconnect_cancels_it() -> None:
    disconnected = asyncio.Event()
    signal = CancelSignal()
    watcher = _DisconnectWatcher(_receiver(disconnected), signal)
    await asyncio.sleep(_WATCH_AFTER * 2.5)  # past the second tick: the watcher task runs
    sweep = _streams._sweep  # pyright: ignore[reportPrivateUsage]
    assert sweep is not None and not sweep.young and not sweep.old  # handed over to its task
    disconnected.set()
    for _ in range(20):
        if signal.cancelled:
            break
        await asyncio.sleep(0.01)
    assert signal.cancelled and signal.reason == "disconnected"
    watcher.stop()


async def test_a_watcher_stopped_before_its_tick_never_watches() -> None:
    disconnected = asyncio.Event()
    disconnected.set()  # a disconnect that only a running watcher task would read
    signal = CancelSignal()
    watcher = _DisconnectWatcher(_receiver(disconnected), signal)
    await asyncio.sleep(0)
    watcher.stop()
    await asyncio.sleep(_WATCH_AFTER * 2.5)
    assert not signal.cancelled


def test_each_event_loop_gets_its_own_sweep() -> None:
    loops: list[Any] = []

    async def one() -> None:
        watcher = _DisconnectWatcher(_receiver(asyncio.Event()), CancelSignal())
        sweep = _streams._sweep  # pyright: ignore[reportPrivateUsage]
        assert sweep is not None
        loops.append(sweep.loop)
        assert sweep.loop is asyncio.get_running_loop()
        watcher.stop()

    asyncio.run(one())
    asyncio.run(one())
    assert loops[0] is not loops[1]
