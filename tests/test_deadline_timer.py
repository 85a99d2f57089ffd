"""backends._timeout.Deadline: asyncio.timeout_at's contract with one timer."""

from __future__ import annotations

import asyncio

import pytest

from fastapi_mcp_ctx.backends._timeout import Deadline


class Boom(Exception):
    pass


async def test_expiry_becomes_timeout_error() -> None:
    loop = asyncio.get_running_loop()
    deadline = Deadline(loop.time() + 0.01)
    with pytest.raises(TimeoutError) as caught:
        async with deadline:
            await asyncio.sleep(30)
    assert deadline.expired
    assert isinstance(caught.value.__cause__, asyncio.CancelledError)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # the cancellation was taken back


async def test_error_factory_replaces_timeout_error() -> None:
    loop = asyncio.get_running_loop()
    with pytest.raises(Boom):
        async with Deadline(loop.time() + 0.01, Boom):
            await asyncio.sleep(30)


async def test_a_block_that_ends_in_time_leaves_no_timer() -> None:
    loop = asyncio.get_running_loop()
    deadline = Deadline(loop.time() + 0.05)
    async with deadline:
        await asyncio.sleep(0)
    await asyncio.sleep(0.1)  # past ``at``: nothing fires
    assert not deadline.expired


@pytest.mark.parametrize("seconds", [30.0, 0.0], ids=["before-expiry", "at-expiry"])
async def test_an_outside_cancellation_still_propagates(seconds: float) -> None:
    """Cancelled from outside, before ``at`` or in the turn the deadline fires: the task stays cancelled."""
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()

    async def body() -> None:
        async with Deadline(loop.time() + seconds):
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(body())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_own_exceptions_pass_through() -> None:
    loop = asyncio.get_running_loop()
    with pytest.raises(Boom):
        async with Deadline(loop.time() + 30):
            raise Boom


async def test_own_timeout_error_after_expiry_is_the_factory_error() -> None:
    loop = asyncio.get_running_loop()
    deadline = Deadline(loop.time(), Boom)
    with pytest.raises(Boom):
        async with deadline:
            deadline.expired = True  # as if the timer fired while the block raised its own
            raise TimeoutError


async def test_outside_a_task_is_refused() -> None:
    """On a running loop but in no task (a loop callback driving a coroutine by hand)."""
    loop = asyncio.get_running_loop()
    caught: list[BaseException] = []

    def callback() -> None:
        coro = Deadline(loop.time() + 1).__aenter__()
        try:
            coro.send(None)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            caught.append(exc)

    loop.call_soon(callback)
    await asyncio.sleep(0.01)
    assert len(caught) == 1 and isinstance(caught[0], RuntimeError) and "inside a task" in str(caught[0])


class Inner(Exception):
    pass


async def test_a_nested_later_deadline_starts_no_timer_and_the_outer_error_ends_both() -> None:
    loop = asyncio.get_running_loop()
    outer = Deadline(loop.time() + 0.02, Boom)
    inner = Deadline(loop.time() + 30, Inner)
    with pytest.raises(Boom):
        async with outer:
            async with inner:
                assert inner._handle is None  # pyright: ignore[reportPrivateUsage]
                await asyncio.sleep(30)
    assert outer.expired and not inner.expired
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_nested_earlier_deadline_has_its_own_timer_and_error() -> None:
    loop = asyncio.get_running_loop()
    outer = Deadline(loop.time() + 30, Boom)
    inner = Deadline(loop.time() + 0.02, Inner)
    with pytest.raises(Inner):
        async with outer:
            async with inner:
                assert inner._handle is not None  # pyright: ignore[reportPrivateUsage]
                await asyncio.sleep(30)
    assert inner.expired and not outer.expired
    async with Deadline(loop.time() + 30) as alone:  # the outer block left no entry behind
        assert alone._outer is None  # pyright: ignore[reportPrivateUsage]
