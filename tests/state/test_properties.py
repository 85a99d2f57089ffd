"""Random operation sequences against a model dict, on every backend (hypothesis).

Keys come from a small alphabet chosen to exercise byte ordering (``-`` < ``.`` < ``/`` <
digits < upper case < ``_`` < lower case) and prefix boundaries. Where the backend takes an
injected clock (memory, SQLite, PostgreSQL) the sequence also moves time and uses short TTLs;
on Redis (native expiry on the server's clock) TTLs are long enough never to fire.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastapi_mcp_ctx.state import ContextState

from .conftest import FAKE_CLOCK_KINDS, Env

KEYS = ["a", "a-b", "a.b", "a/", "a/b", "a/b/c", "a/c", "a0", "aB", "a_", "ab", "b", "b/a", "B", "-", "_"]
PREFIXES = ["", "a", "a/", "a/b", "b", "-", "z"]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=5), inner, max_size=3),
    ),
    max_leaves=8,
)
keys = st.sampled_from(KEYS)
short_ttls = st.sampled_from([None, None, 1.0, 2.5, 10.0])
long_ttls = st.sampled_from([None, 3600.0])


def ops(fake_clock: bool) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    ttls = short_ttls if fake_clock else long_ttls
    choices = [
        st.tuples(st.just("set"), keys, json_values, ttls),
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("take"), keys),
        st.tuples(st.just("set_many"), st.dictionaries(keys, json_values, max_size=4), ttls),
        st.tuples(st.just("get_many"), st.lists(keys, max_size=5)),
        st.tuples(st.just("delete_many"), st.lists(keys, max_size=5)),
        st.tuples(st.just("list"), st.sampled_from(PREFIXES), st.integers(min_value=1, max_value=4)),
        st.tuples(st.just("list"), st.just(""), st.integers(min_value=1, max_value=3)),
    ]
    if fake_clock:
        choices.append(st.tuples(st.just("advance"), st.sampled_from([0.5, 1.0, 2.5, 4.0])))
    # Start from a populated store so that list() walks several pages.
    seed = st.tuples(st.just("set_many"), st.dictionaries(keys, json_values, min_size=4, max_size=12), ttls)
    return st.builds(lambda first, rest: [first, *rest], seed, st.lists(st.one_of(*choices), min_size=1, max_size=25))


class Model:
    """The reference: a dict of key -> (JSON value, expires_at or None), on the same clock."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.data: dict[str, tuple[Any, float | None]] = {}

    def now(self) -> float:
        return self.env.clock() if self.env.clock is not None else 0.0

    def live(self, key: str) -> bool:
        entry = self.data.get(key)
        return entry is not None and (entry[1] is None or entry[1] > self.now())

    def get(self, key: str) -> Any:
        return self.data[key][0] if self.live(key) else None

    def set(self, key: str, value: Any, ttl: float | None) -> None:
        self.data[key] = (value, None if ttl is None else self.now() + ttl)

    def delete(self, key: str) -> bool:
        was = self.live(key)
        self.data.pop(key, None)
        return was


async def run_sequence(env: Env, steps: list[tuple[Any, ...]]) -> None:
    state = ContextState(env.backend, "prop-" + uuid.uuid4().hex)
    model = Model(env)
    for step in steps:
        op = step[0]
        if op == "set":
            _, key, value, ttl = step
            await state.set(key, value, ttl=ttl)
            model.set(key, value, ttl)
        elif op == "get":
            assert await state.get(step[1]) == model.get(step[1]), step
        elif op == "delete":
            assert await state.delete(step[1]) == model.delete(step[1]), step
        elif op == "take":
            expected = model.get(step[1])
            model.delete(step[1])
            assert await state.take(step[1]) == expected, step
        elif op == "set_many":
            _, items, ttl = step
            await state.set_many(items, ttl=ttl)
            for key, value in items.items():
                model.set(key, value, ttl)
        elif op == "get_many":
            expected = {k: model.get(k) for k in step[1] if model.live(k)}
            assert await state.get_many(step[1]) == expected, step
        elif op == "delete_many":
            expected_n = sum(model.delete(k) for k in dict.fromkeys(step[1]))
            assert await state.delete_many(step[1]) == expected_n, step
        elif op == "list":
            _, prefix, limit = step
            walked: list[tuple[str, Any]] = []
            cursor: str | None = None
            for _ in range(len(KEYS) + 2):
                page = await state.list(prefix, cursor=cursor, limit=limit)
                walked.extend((i.key, i.value) for i in page.items)
                if page.next_cursor is None:
                    break
                assert len(page.items) == limit
                cursor = page.next_cursor
            else:
                raise AssertionError(f"list({prefix!r}) did not end")
            expected_items = [(k, model.get(k)) for k in sorted(model.data) if k.startswith(prefix) and model.live(k)]
            assert walked == expected_items, step
        elif op == "advance":
            await env.advance(step[1])
        else:  # pragma: no cover
            raise AssertionError(op)
    # final full comparison
    everything = await state.get_many(KEYS)
    assert everything == {k: model.get(k) for k in KEYS if model.live(k)}


@settings(
    max_examples=int(os.environ.get("MCP_STATE_EXAMPLES", "40")),  # raise it for a deeper run
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_random_operation_sequences_match_the_model(env: Env, data: st.DataObject) -> None:
    steps = data.draw(ops(env.kind in FAKE_CLOCK_KINDS), label="steps")
    await run_sequence(env, steps)
