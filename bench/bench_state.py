#!/usr/bin/env python
"""Throughput of ``ctx.state`` (``ContextState``) against the raw client, same server.

    scripts/services.sh start && eval "$(scripts/services.sh env)"
    .venv/bin/python bench/bench_state.py [--ops 20000] [--concurrency 32] [--repeat 3]

Measures ``ContextState.get`` / ``set`` at N-way concurrency (asyncio tasks) on
* real Redis, against raw redis-py ``GET`` / ``SET`` (``Redis.from_url(url, decode_responses=True)``);
* PostgreSQL, against a raw SQLAlchemy Core statement on an autocommit engine with the same
  pool (``SELECT value … WHERE key = :k`` / ``INSERT … ON CONFLICT DO UPDATE``).
The raw side writes a pre-serialised JSON string; the facade serialises a dict each time and
validates the key, namespaces it by tenant and decodes the JSON on read. Raw and facade runs
alternate (``--repeat`` pairs) so both see the same machine load; the figures are medians and
the ratio is the median of the paired facade / raw ratios (target ≥ 0.8).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi_mcp_ctx.backends.redis import RedisBackend  # noqa: E402
from fastapi_mcp_ctx.backends.sql import SqlBackend  # noqa: E402
from fastapi_mcp_ctx.state import ContextState  # noqa: E402

VALUE: dict[str, Any] = {"name": "Widget", "count": 42, "tags": ["a", "b"], "price": 9.5}
VALUE_JSON = json.dumps(VALUE, separators=(",", ":"))
NKEYS = 1000
Op = Callable[[int], Awaitable[Any]]
Row = tuple[str, float, float, float]  # name, facade ops/s, raw ops/s, median paired ratio


async def measure(op: Op, ops: int, concurrency: int) -> float:
    """ops/s of ``op(i)`` run ``ops`` times by ``concurrency`` tasks."""
    per_task = ops // concurrency

    async def worker(w: int) -> None:
        base = w * per_task
        for i in range(base, base + per_task):
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return per_task * concurrency / (time.perf_counter() - started)


async def compare(rows: list[Row], name: str, facade: Op, raw: Op, args: argparse.Namespace) -> None:
    """Alternate short raw / facade runs so both see the same machine load; keep the medians."""
    await measure(facade, min(args.ops, 2000), args.concurrency)  # warm-up: pools, caches
    await measure(raw, min(args.ops, 2000), args.concurrency)
    f_runs: list[float] = []
    r_runs: list[float] = []
    ratios: list[float] = []
    for i in range(args.repeat):
        if i % 2:
            f = await measure(facade, args.ops, args.concurrency)
            r = await measure(raw, args.ops, args.concurrency)
        else:
            r = await measure(raw, args.ops, args.concurrency)
            f = await measure(facade, args.ops, args.concurrency)
        f_runs.append(f)
        r_runs.append(r)
        ratios.append(f / r)
    rows.append((name, statistics.median(f_runs), statistics.median(r_runs), statistics.median(ratios)))


async def bench_redis(url: str, args: argparse.Namespace, rows: list[Row]) -> None:
    from redis.asyncio import Redis

    ns = f"mcp-bench:{os.getpid()}:"
    backend = RedisBackend(url, namespace=ns)
    state = ContextState(backend, "bench")
    raw = Redis.from_url(url, decode_responses=True)  # the plain redis-py client (default pool)
    keys = [f"item/{i % NKEYS}" for i in range(NKEYS)]
    raw_keys = [f"{ns}raw:{k}" for k in keys]
    try:
        await state.set_many(dict.fromkeys(keys, VALUE))
        await raw.mset(dict.fromkeys(raw_keys, VALUE_JSON))

        async def f_get(i: int) -> Any:
            return await state.get(keys[i % NKEYS])

        async def r_get(i: int) -> Any:
            return json.loads(await raw.get(raw_keys[i % NKEYS]))  # a raw user decodes too

        async def f_set(i: int) -> None:
            await state.set(keys[i % NKEYS], VALUE)

        async def r_set(i: int) -> None:
            await raw.set(raw_keys[i % NKEYS], VALUE_JSON)

        await compare(rows, "redis get", f_get, r_get, args)
        await compare(rows, "redis set", f_set, r_set, args)
    finally:
        keys_left = [k async for k in raw.scan_iter(match=ns + "*", count=1000)]
        if keys_left:
            await raw.delete(*keys_left)
        await raw.aclose()
        await backend.aclose()


async def bench_postgres(url: str, args: argparse.Namespace, rows: list[Row]) -> None:
    import sqlalchemy as sa
    from sqlalchemy.dialects.postgresql import insert
    from sqlalchemy.ext.asyncio import create_async_engine

    from fastapi_mcp_ctx.backends._sql_models import state_table as t

    backend = SqlBackend(url, sweep_interval=0)
    state = ContextState(backend, "bench")
    engine = create_async_engine(url, pool_size=10, max_overflow=20)
    auto = engine.execution_options(isolation_level="AUTOCOMMIT")
    keys = [f"item/{i % NKEYS}" for i in range(NKEYS)]
    raw_keys = [f"raw/{k}" for k in keys]
    upsert = insert(t)
    upsert = upsert.on_conflict_do_update(index_elements=[t.c.key], set_={"value": upsert.excluded.value})
    try:
        await state.set_many(dict.fromkeys(keys, VALUE))
        async with engine.begin() as conn:
            await conn.execute(upsert, [{"key": k, "value": VALUE_JSON, "expires_at": None} for k in raw_keys])

        async def f_get(i: int) -> Any:
            return await state.get(keys[i % NKEYS])

        async def r_get(i: int) -> Any:
            async with auto.connect() as conn:
                text = (await conn.execute(sa.select(t.c.value).where(t.c.key == raw_keys[i % NKEYS]))).scalar_one()
            return json.loads(text)

        async def f_set(i: int) -> None:
            await state.set(keys[i % NKEYS], VALUE)

        async def r_set(i: int) -> None:
            async with auto.connect() as conn:
                await conn.execute(upsert, {"key": raw_keys[i % NKEYS], "value": VALUE_JSON, "expires_at": None})

        await compare(rows, "postgres get", f_get, r_get, args)
        await compare(rows, "postgres set", f_set, r_set, args)
    finally:
        async with engine.begin() as conn:
            await conn.execute(sa.delete(t).where(t.c.key.like("raw/%") | t.c.key.like("t/bench/%")))
        await engine.dispose()
        await backend.aclose()


def migrate(url: str) -> None:
    from fastapi_mcp_ctx.backends.sql_migrations import upgrade

    asyncio.run(upgrade(url))


async def main_async(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    if args.redis_url:
        await bench_redis(args.redis_url, args, rows)
    if args.postgres_url:
        await bench_postgres(args.postgres_url, args, rows)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", default=os.environ.get("MCP_TEST_REDIS_URL"))
    parser.add_argument("--postgres-url", default=os.environ.get("MCP_TEST_POSTGRES_URL"))
    parser.add_argument("--ops", type=int, default=5000, help="operations per run")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=9, help="alternating raw/facade run pairs")
    args = parser.parse_args()
    if not args.redis_url and not args.postgres_url:
        parser.error("no service: set MCP_TEST_REDIS_URL / MCP_TEST_POSTGRES_URL (scripts/services.sh env)")
    if args.postgres_url:
        migrate(args.postgres_url)
    rows = asyncio.run(main_async(args))
    print(
        f"ctx.state vs raw client, {args.concurrency}-way concurrency, {args.ops} ops/run, "
        f"medians of {args.repeat} alternating run pairs (ratio: median of the paired ratios)"
    )
    print(f"{'operation':<14} {'ctx.state ops/s':>16} {'raw ops/s':>12} {'ratio':>7}")
    worst = 1e9
    for name, facade, raw, ratio in rows:
        worst = min(worst, ratio)
        print(f"{name:<14} {facade:>16,.0f} {raw:>12,.0f} {ratio:>6.2f}x")
    print(f"lowest ratio {worst:.2f}x (target >= 0.80x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
