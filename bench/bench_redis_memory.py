"""What the Redis stores hold per idle 2025 session and per stored SSE event, on one Redis and on
a Redis Cluster (issue 21): Redis's ``used_memory`` (summed over the masters of a cluster)
before and after writing through the stores themselves.

    .venv/bin/python bench/bench_redis_memory.py URL [URL ...] [--sessions 5000] [--events 20000]

Each URL (``redis://…``, ``redis+cluster://…``, ``redis+sentinel://…``) gets a fresh namespace:
``--sessions`` records (the official client's capabilities and client info, an owner), then
``--events`` events of a typical ``notifications/message`` (about 120 bytes of JSON) spread over
one stream per 100 events, then everything written is deleted. Prints bytes per session and per
event. Bounded: the writes only, at most a few tens of thousands.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from typing import Any

from fastapi_mcp_ctx._replicas.link import RedisLink
from fastapi_mcp_ctx._replicas.redis_events import RedisEventStore
from fastapi_mcp_ctx._replicas.redis_sessions import RedisSessionStore
from fastapi_mcp_ctx._transport.events import StreamKey, new_stream_id
from fastapi_mcp_ctx._transport.sessions import SessionRecord

CAPABILITIES = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}}
EVENT = json.dumps(
    {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "logger": "bench", "data": "x" * 40}},
    separators=(",", ":"),
).encode()


async def used_memory(link: RedisLink) -> int:
    """``used_memory`` of the server, or the sum over the cluster's masters."""
    redis: Any = link.commands().redis
    if link.target.sharded:
        await link.ping()
        total = 0
        for node in redis.get_primaries():
            info = await redis.execute_command("INFO", "memory", target_nodes=node)
            total += int(info["used_memory"])
        return total
    return int((await redis.execute_command("INFO", "memory"))["used_memory"])


async def measure(url: str, sessions: int, events: int) -> dict[str, float]:
    namespace = f"mem{uuid.uuid4().hex[:8]}:"
    link = RedisLink(url, namespace=namespace)
    store = RedisSessionStore(link, idle_seconds=3600, max_sessions=sessions + 10)
    log = RedisEventStore(link, max_events=1000, max_age_seconds=3600, live_seconds=3600)
    try:
        before = await used_memory(link)
        ids: list[str] = []
        for i in range(sessions):
            record = SessionRecord.from_initialize(
                {"capabilities": CAPABILITIES, "clientInfo": {"name": "bench-memory", "version": "1.0"}}, "2025-11-25", f"user-{i % 50}"
            )
            await store.create(record)
            ids.append(record.id)
        with_sessions = await used_memory(link)
        for n in range(events // 100):
            key = StreamKey(ids[n % len(ids)], new_stream_id())
            await log.open(key)
            for _ in range(100):
                await log.append(key, EVENT)
        with_events = await used_memory(link)
        return {
            "session_bytes": (with_sessions - before) / sessions,
            "event_bytes": (with_events - with_sessions) / max(1, events // 100 * 100),
        }
    finally:
        redis: Any = link.commands().redis
        async for key in redis.scan_iter(match=f"{namespace}*", count=1000):
            await link.call("bench", "DEL", key)
        await link.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("urls", nargs="+")
    ap.add_argument("--sessions", type=int, default=5000)
    ap.add_argument("--events", type=int, default=20000)
    args = ap.parse_args()
    print("| deployment | bytes per idle session | bytes per stored SSE event |\n|---|---|---|")
    for url in args.urls:
        got = await measure(url, args.sessions, args.events)
        print(f"| `{url.split('://', 1)[0]}` | {got['session_bytes']:,.0f} | {got['event_bytes']:,.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
