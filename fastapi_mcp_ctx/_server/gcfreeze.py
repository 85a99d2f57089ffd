"""``MCP_GC_FREEZE``: the start-up objects out of the cyclic garbage collector's way, once per process.

A request that waits mid-flight (its session verified in Redis, ``MCP_SESSION_STORE_URL=redis://``)
keeps its objects alive across collections, so they are promoted and CPython runs a *full*
collection far more often (every time the promoted objects reach a quarter of the old
generation), and each full collection walks every object of the application: its modules,
models, schemas and tools. Measured on the benchmark app (workload s, 32 connections): about 10
full collections of ~50 ms each in 8 s with Redis sessions, one without; tens of µs of CPU per
request and the p99.

:func:`freeze_startup_objects` (the router calls it at its first request, so after any fork of
a worker) collects once, then moves every live object into the permanent generation
(:func:`gc.freeze`): full collections from then on walk only what requests made. Objects still
die by reference counting as before; only a reference cycle among start-up objects that
becomes garbage later is never collected. Process-wide, so off by default.
"""

from __future__ import annotations

import gc
import os

__all__ = ["freeze_startup_objects"]

_frozen_in: list[int] = []  # the process ids that froze (a forked child freezes again)


def freeze_startup_objects() -> bool:
    """``gc.collect()`` then ``gc.freeze()``, once per process; False when this process already did."""
    pid = os.getpid()
    if pid in _frozen_in:
        return False
    _frozen_in.append(pid)
    gc.collect()
    gc.freeze()
    return True
