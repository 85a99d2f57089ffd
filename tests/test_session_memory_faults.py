"""Session-metadata memory found by a hostile fault run (2026-12-01)."""

from __future__ import annotations

import gc
import json
import tracemalloc

from conftest import Wire, make_app, make_router, open_client


async def test_a_sessions_client_metadata_costs_about_its_bounded_size_not_nine_times_it() -> None:
    """``MCP_MAX_CLIENT_METADATA_BYTES`` (64 KiB) bounds what one ``initialize`` may carry, as JSON.
    The session keeps it parsed: ``capabilities.experimental`` of 5 500 small members (under the
    bound as compact JSON) holds ~550 KB of Python objects per session. With the default
    ``max_sessions`` (10 000) and no ``max_sessions_per_owner``, one client holds ~5.5 GB."""
    router = make_router()

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    app = make_app(router)
    capabilities = {"experimental": {f"k{i}": [0] for i in range(5500)}}
    size = len(json.dumps(capabilities, separators=(",", ":")))
    assert size < 64 * 1024
    count = 40
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(count):
                await wire.initialize(capabilities=capabilities, initialized=False)
            gc.collect()
            per_session = (tracemalloc.get_traced_memory()[0] - before) / count
        finally:
            tracemalloc.stop()
    assert per_session < 3 * size, f"{per_session / 1024:.0f} KiB held per session for {size / 1024:.0f} KiB of metadata"
