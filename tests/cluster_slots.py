"""The cross-slot check of the Redis stores (issue 21): every Lua script a store sends names
keys of ONE hash slot, and every script a store module defines is either run by the cluster
exercise of tests/test_redis_cluster.py or declared one-Redis-only.

Reusable for a new store: ``scripts_of(module, ...)`` lists the scripts of its modules, and
``one_slot()`` records (and checks) what the stores send while it is active::

    with one_slot() as sent:
        ...  # exercise the store on the cluster
    assert scripts_of(my_module).keys() - sent.shas - {SINGLE_ONLY...} == set()
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from redis.crc import key_slot

from fastapi_mcp_ctx._replicas.autopipe import KeyBatcher
from fastapi_mcp_ctx.backends._redis_client import LoopClient, Script


def _sha(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


def scripts_of(*modules: ModuleType) -> dict[str, str]:
    """``{sha: "module.NAME"}`` of every script the modules define: :class:`Script` objects and,
    for modules of raw Lua (``backends._redis_scripts``), their upper-case string constants."""
    found: dict[str, str] = {}
    for module in modules:
        objects = {name: v for name, v in vars(module).items() if isinstance(v, Script)}
        for name, value in objects.items():
            found[value.sha] = f"{module.__name__}.{name}"
        if not objects:  # a module of raw Lua: its constants (fragments of Script modules are not scripts)
            for name, value in vars(module).items():
                if isinstance(value, str) and name.isupper() and "redis.call" in value:
                    found[_sha(value)] = f"{module.__name__}.{name}"
    return found


@dataclass
class Sent:
    """What the stores sent while :func:`one_slot` was active."""

    shas: set[str] = field(default_factory=lambda: set())
    crossing: list[tuple[str, list[str]]] = field(default_factory=lambda: [])


@contextmanager
def one_slot() -> Iterator[Sent]:
    """Record every script call of every :class:`LoopClient` and every lookup of a
    :class:`KeyBatcher`; a call whose keys map to more than one slot is recorded in
    ``crossing`` (then raised by the caller's assertion)."""
    sent = Sent()
    original = LoopClient.eval

    async def recording(self: LoopClient, script: Script, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        sent.shas.add(script.sha)
        if len({key_slot(k.encode()) for k in keys}) > 1:
            sent.crossing.append((script.sha, list(keys)))
        return await original(self, script, keys, args)

    batched = KeyBatcher.run

    async def recording_batch(self: KeyBatcher, key: str) -> Any:
        # per key (a cluster): the key alone; else the fixed key with every key of the batch
        sent.shas.add(self.script.sha)
        keys = [key] if self.per_key else [self.fixed_key, key]
        if len({key_slot(k.encode()) for k in keys}) > 1:
            sent.crossing.append((self.script.sha, keys))
        return await batched(self, key)

    LoopClient.eval = recording  # type: ignore[method-assign]
    KeyBatcher.run = recording_batch  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        LoopClient.eval = original  # type: ignore[method-assign]
        KeyBatcher.run = batched  # type: ignore[method-assign]
