"""The handler call's cancel scope (``_context/cancel_scope.py``): free until cancelled, and then
anyio-correct: shields hold, anyio scopes and task groups of the handler let it through, an
outside cancellation still propagates, nothing pending outlives the scope."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import pytest
import sniffio

from fastapi_mcp_ctx._context import cancel_scope as cancel_scope_module
from fastapi_mcp_ctx._context.cancel_scope import CallScope, new_cancel_scope

pytestmark = pytest.mark.anyio

HANG_GUARD = 10.0  # seconds: a broken scope fails the test instead of hanging it


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_call_never_cancelled_costs_no_anyio_state_and_returns() -> None:
    scope = CallScope()
    with scope:
        await asyncio.sleep(0)
        task = asyncio.current_task()
        assert task is not None
        assert task.cancelling() == 0
    assert not scope.cancelled_caught
    await asyncio.sleep(0)  # nothing pending


async def test_cancel_from_another_task_ends_the_call_and_is_swallowed() -> None:
    started, scope = asyncio.Event(), CallScope()
    reached: list[str] = []

    async def handler() -> None:
        with scope:
            started.set()
            await asyncio.Event().wait()
            reached.append("after the wait")  # never
        reached.append("after the scope")
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
        await asyncio.sleep(0)  # no cancellation left pending
        reached.append("awaited after")

    task = asyncio.ensure_future(handler())
    await started.wait()
    scope.cancel()
    await asyncio.wait_for(task, HANG_GUARD)
    assert reached == ["after the scope", "awaited after"]
    assert scope.cancelled_caught


async def test_a_shielded_anyio_scope_holds_the_cancellation_until_it_ends() -> None:
    in_shield, release, scope = asyncio.Event(), asyncio.Event(), CallScope()
    steps: list[str] = []

    async def handler() -> None:
        with scope:
            with anyio.CancelScope(shield=True):
                in_shield.set()
                await release.wait()
                steps.append("shield finished its work")
            await asyncio.Event().wait()  # the held cancellation lands here
            steps.append("never")
        steps.append("scope ended")

    task = asyncio.ensure_future(handler())
    await in_shield.wait()
    scope.cancel()
    for _ in range(20):  # several retries of the held delivery pass while the shield holds
        await asyncio.sleep(cancel_scope_module.RETRY_SECONDS)
    assert steps == [] and not task.done()
    release.set()
    await asyncio.wait_for(task, HANG_GUARD)
    assert steps == ["shield finished its work", "scope ended"]
    assert scope.cancelled_caught


async def test_a_sync_tools_thread_runs_to_its_end_then_the_call_is_cancelled() -> None:
    thread_started, let_thread_end = threading.Event(), threading.Event()
    scope, steps = CallScope(), list[str]()

    def blocking() -> str:
        thread_started.set()
        let_thread_end.wait(HANG_GUARD)
        return "thread result"

    async def handler() -> None:
        with scope:
            steps.append(await anyio.to_thread.run_sync(blocking))  # shielded while the thread runs
            await asyncio.sleep(HANG_GUARD)
            steps.append("never")

    task = asyncio.ensure_future(handler())
    await anyio.to_thread.run_sync(thread_started.wait, HANG_GUARD)
    scope.cancel()
    await asyncio.sleep(cancel_scope_module.RETRY_SECONDS * 4)
    assert not task.done()
    let_thread_end.set()
    await asyncio.wait_for(task, HANG_GUARD)
    assert steps == ["thread result"] and scope.cancelled_caught


@pytest.mark.parametrize("opener", ["fail_after", "move_on_after", "task_group"])
async def test_the_handlers_own_anyio_scopes_let_the_cancellation_through(opener: str) -> None:
    started, scope = asyncio.Event(), CallScope()
    child_cancelled: list[bool] = []

    async def child() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            child_cancelled.append(True)
            raise

    async def handler() -> None:
        with scope:
            if opener == "fail_after":
                with anyio.fail_after(HANG_GUARD * 10):
                    started.set()
                    await asyncio.Event().wait()
            elif opener == "move_on_after":
                with anyio.move_on_after(HANG_GUARD * 10):
                    started.set()
                    await asyncio.Event().wait()
                raise AssertionError("move_on_after swallowed the call's cancellation")
            else:
                async with anyio.create_task_group() as group:
                    group.start_soon(child)
                    await asyncio.sleep(0)
                    started.set()
                    await asyncio.Event().wait()

    task = asyncio.ensure_future(handler())
    await started.wait()
    scope.cancel()
    await asyncio.wait_for(task, HANG_GUARD)  # neither TimeoutError nor AssertionError
    assert scope.cancelled_caught
    if opener == "task_group":
        assert child_cancelled == [True]


@pytest.mark.parametrize("scope_cancelled_too", [True, False])
async def test_an_outside_native_cancellation_still_propagates(scope_cancelled_too: bool) -> None:
    """The server's own ``Task.cancel()`` passes the scope, alone or in the same loop iteration
    as the scope's own cancellation."""
    started, scope = asyncio.Event(), CallScope()

    async def handler() -> None:
        with scope:
            started.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(handler())
    await started.wait()
    if scope_cancelled_too:
        scope.cancel()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, HANG_GUARD)
    assert task.cancelled() and not scope.cancelled_caught


async def test_an_outer_anyio_scope_cancelled_propagates_past_the_call() -> None:
    started = asyncio.Event()
    after_call: list[str] = []

    async def request() -> None:
        with anyio.CancelScope() as outer:
            group_scope.append(outer)
            with CallScope():
                started.set()
                await asyncio.Event().wait()
            after_call.append("the call's scope swallowed the outer cancellation")
        after_call.append("outer ended")

    group_scope: list[anyio.CancelScope] = []
    task = asyncio.ensure_future(request())
    await started.wait()
    group_scope[0].cancel()
    await asyncio.wait_for(task, HANG_GUARD)
    assert after_call == ["outer ended"]


async def test_a_cancel_from_inside_the_call_lands_at_its_next_suspension_only() -> None:
    scope = CallScope()
    with scope:
        scope.cancel()  # the handler cancels its own call and returns without awaiting
    assert not scope.cancelled_caught
    await asyncio.sleep(0)  # nothing pending: this await is not cancelled
    scope2, reached = CallScope(), list[str]()
    with scope2:
        scope2.cancel()
        reached.append("before the await")
        await asyncio.sleep(HANG_GUARD)
        reached.append("never")
    assert reached == ["before the await"] and scope2.cancelled_caught


async def test_a_scope_cancelled_before_it_is_entered_cancels_at_the_first_await() -> None:
    scope = CallScope()
    scope.cancel()
    with scope:
        await asyncio.sleep(HANG_GUARD)
        raise AssertionError("not cancelled")
    assert scope.cancelled_caught


async def test_a_handler_that_swallows_the_cancellation_leaves_nothing_pending() -> None:
    started, scope = asyncio.Event(), CallScope()
    steps: list[str] = []

    async def handler() -> None:
        with scope:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                steps.append("caught")
            await asyncio.sleep(0)  # edge-delivered: the cancellation does not come again
            steps.append("went on")
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        await asyncio.sleep(0)
        steps.append("after")

    task = asyncio.ensure_future(handler())
    await started.wait()
    scope.cancel()
    await asyncio.wait_for(task, HANG_GUARD)
    assert steps == ["caught", "went on", "after"]
    assert not scope.cancelled_caught


async def test_off_plain_asyncio_the_scope_is_anyios() -> None:
    """A library that set sniffio's context (trio-asyncio, an anyio runner) gets anyio's scope."""
    assert isinstance(new_cancel_scope(), CallScope)
    token = sniffio.current_async_library_cvar.set("asyncio")
    try:
        assert isinstance(new_cancel_scope(), anyio.CancelScope)
    finally:
        sniffio.current_async_library_cvar.reset(token)


async def test_anyio_still_keeps_what_the_scope_reads() -> None:
    """The shield check reads anyio's private task states: an anyio release that moved them
    fails here, not silently in production."""
    import anyio._backends._asyncio as backend

    with anyio.CancelScope(shield=True) as outer:
        with anyio.CancelScope() as inner:
            task = asyncio.current_task()
            assert task is not None
            states: Any = getattr(backend, "_task_states")  # noqa: B009 - private to anyio
            state = states.get(task)
            assert state is not None and state.cancel_scope is inner
            read_inner: Any = inner
            read_outer: Any = outer
            assert read_inner._parent_scope is outer and read_outer._shield is True
            assert cancel_scope_module._anyio_scope_of(task) is inner  # pyright: ignore[reportPrivateUsage]
