"""The EventStore Protocol on its in-process twin: sequences, ending, cursors, waiting,
retention by count and age on a controllable clock, the stream cap, sessions, and the id codec.

The same assertions hold for any implementation (a Redis Streams store runs them next).
"""

from __future__ import annotations

import anyio
import pytest

from fastapi_mcp_ctx._transport.events import (
    EventStore,
    StreamKey,
    UnknownStreamError,
    format_event_id,
    new_stream_id,
    parse_event_id,
)
from fastapi_mcp_ctx._transport.memory_events import MemoryEventStore
from fastapi_mcp_ctx.errors import InvalidEventIdError


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def key(session: str = "s1", stream: str | None = None) -> StreamKey:
    return StreamKey(session, stream or new_stream_id())


async def test_sequences_start_at_one_and_read_after_a_cursor() -> None:
    store: EventStore = MemoryEventStore()
    k = key()
    await store.open(k)
    assert [await store.append(k, d) for d in (None, b'{"a":1}', b'{"b":2}')] == [1, 2, 3]
    page = await store.read(k, 1)
    assert [(e.seq, e.data) for e in page.events] == [(2, b'{"a":1}'), (3, b'{"b":2}')]
    assert not page.ended
    assert (await store.read(k, 0)).events[0].data is None  # the empty (priming) event
    assert (await store.read(k, 3)).events == ()


async def test_last_append_ends_the_stream_and_nothing_follows() -> None:
    store = MemoryEventStore()
    k = key()
    await store.open(k)
    await store.append(k, b"1")
    await store.append(k, b"final", last=True)
    assert (await store.read(k, 0)).ended
    assert (await store.read(k, 2)).ended
    with pytest.raises(UnknownStreamError):
        await store.append(k, b"late")
    await store.end(k)  # a no-op on an ended stream
    await store.end(key())  # and on an unknown one


async def test_end_without_a_message_ends_the_stream() -> None:
    store = MemoryEventStore()
    k = key()
    await store.open(k)
    await store.end(k)
    page = await store.read(k, 0)
    assert page.events == () and page.ended


async def test_unknown_streams_and_cursors_beyond_the_end_raise() -> None:
    store = MemoryEventStore()
    k = key()
    with pytest.raises(UnknownStreamError):
        await store.read(k, 0)
    with pytest.raises(UnknownStreamError):
        await store.append(k, b"x")
    await store.open(k)
    await store.append(k, b"x")
    with pytest.raises(UnknownStreamError):
        await store.read(k, 2)
    with pytest.raises(UnknownStreamError):
        await store.read(StreamKey("another session", k.stream_id), 0)  # keyed by session too


async def test_read_waits_for_the_next_event_or_the_end() -> None:
    store = MemoryEventStore()
    k = key()
    await store.open(k)
    pages = []

    async def reader() -> None:
        pages.append(await store.read(k, 0, wait=60))  # woken by the append and the end, long before
        pages.append(await store.read(k, 1, wait=60))

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.sleep(0.05)
        assert pages == []
        await store.append(k, b"one")
        await anyio.sleep(0.05)
        await store.end(k)
    assert [e.data for e in pages[0].events] == [b"one"]
    assert pages[1].events == () and pages[1].ended
    with anyio.fail_after(30):
        assert (await store.read(k, 1, wait=60)).ended  # ended: no wait


async def test_read_wait_times_out_with_an_empty_page() -> None:
    store = MemoryEventStore()
    k = key()
    await store.open(k)
    with anyio.fail_after(30):
        page = await store.read(k, 0, wait=0.05)
    assert page.events == () and not page.ended


async def test_retention_by_count_per_stream() -> None:
    store = MemoryEventStore(max_events=3)
    a, b = key(), key()
    for k in (a, b):
        await store.open(k)
    for i in range(10):
        await store.append(a, str(i).encode())
    await store.append(b, b"only")
    assert [e.seq for e in (await store.read(a, 0)).events] == [8, 9, 10]
    assert [e.seq for e in (await store.read(a, 2)).events] == [8, 9, 10], "a cursor in the gap resumes at the oldest kept"
    assert [e.data for e in (await store.read(b, 0)).events] == [b"only"]


async def test_retention_by_age_on_a_controllable_clock() -> None:
    clock = Clock()
    store = MemoryEventStore(max_events=100, max_age_seconds=10, clock=clock)
    k = key()
    await store.open(k)
    await store.append(k, b"old")
    clock.now += 6
    await store.append(k, b"newer")
    clock.now += 5  # "old" is 11 s old, "newer" 5 s
    assert [e.data for e in (await store.read(k, 0)).events] == [b"newer"]
    clock.now += 10
    assert (await store.read(k, 0)).events == ()


async def test_ended_streams_are_forgotten_after_the_age_limit_running_ones_are_not() -> None:
    clock = Clock()
    store = MemoryEventStore(max_age_seconds=10, clock=clock)
    ended, running = key(), key()
    for k in (ended, running):
        await store.open(k)
        await store.append(k, b"x")
    await store.end(ended)
    clock.now += 11
    await store.open(key())  # opening sweeps
    with pytest.raises(UnknownStreamError):
        await store.read(ended, 0)
    assert not (await store.read(running, 0)).ended
    assert len(store) == 2


async def test_the_stream_cap_evicts_the_oldest_ended_streams() -> None:
    clock = Clock()
    store = MemoryEventStore(max_streams=3, clock=clock)
    keys = [key() for _ in range(3)]
    for k in keys:
        await store.open(k)
        await store.end(k)
        clock.now += 1
    await store.open(key())
    assert len(store) == 3
    with pytest.raises(UnknownStreamError):
        await store.read(keys[0], 0)
    await store.read(keys[1], 0)


async def test_drop_session_forgets_its_streams_and_wakes_readers() -> None:
    store = MemoryEventStore()
    mine, other = key("s1"), key("s2")
    for k in (mine, other):
        await store.open(k)
    outcome: list[str] = []

    async def reader() -> None:
        try:
            await store.read(mine, 0, wait=5)
            outcome.append("page")
        except UnknownStreamError:
            outcome.append("gone")

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.sleep(0.05)
        await store.drop_session("s1")
    assert outcome == ["gone"]
    with pytest.raises(UnknownStreamError):
        await store.read(mine, 0)
    await store.read(other, 0)
    assert len(store) == 1


def test_event_ids_round_trip_and_nothing_else_parses() -> None:
    stream = new_stream_id()
    assert len(stream) == 16 and stream != new_stream_id()
    assert parse_event_id(format_event_id(stream, 42)) == (stream, 42)
    assert parse_event_id(f" {stream}:0 ") == (stream, 0)  # optional whitespace around a header value
    for raw in ("", stream, f"{stream}:", f"{stream}:x", f"{stream.upper()}:1", f"{stream}:007", f"{stream}:1:1", f"x{stream}:1"):
        with pytest.raises(InvalidEventIdError) as caught:
            parse_event_id(raw)
        assert caught.value.code == -32600 and caught.value.http_status == 400
