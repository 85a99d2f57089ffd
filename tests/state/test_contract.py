"""The ctx.state contract, run unchanged against every backend (memory, fakeredis, sqlite,
real Redis, real PostgreSQL)."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import uuid
from typing import Any

import pydantic
import pytest
from pydantic import BaseModel, TypeAdapter

from fastapi_mcp_ctx.errors import (
    InvalidCursorError,
    SerializationError,
    TenantRequiredError,
    ValidationError,
)
from fastapi_mcp_ctx.state import ContextState, StateItem, StatePage

from .conftest import Env


class Item(BaseModel):
    name: str
    count: int


JSON_VALUES: list[Any] = [
    None,
    True,
    0,
    -(2**63),
    10**30,
    1.5,
    -0.25,
    "",
    "héllo ☃ \U0001f600 \x00 \ud800",  # non-ASCII, NUL and a lone surrogate survive
    [],
    {},
    [1, "two", None, [3.0]],
    {"nested": {"list": [1, {"a": None}]}, "ünïcode": "ok"},
]


# ------------------------------------------------------------------------------ round trip
@pytest.mark.parametrize("value", JSON_VALUES, ids=range(len(JSON_VALUES)))
async def test_json_values_round_trip(env: Env, value: Any) -> None:
    s = env.state()
    await s.set("k", value)
    assert await s.get("k") == value
    assert await s.get_many(["k"]) == {"k": value}
    assert await s.take("k") == value


async def test_missing_key_is_none_and_overwrite_replaces(env: Env) -> None:
    s = env.state()
    assert await s.get("nope") is None
    assert await s.take("nope") is None
    await s.set("item/1", {"name": "Widget", "count": 42})
    await s.set("item/1", {"name": "Gadget", "count": 1})
    assert await s.get("item/1") == {"name": "Gadget", "count": 1}


async def test_values_come_back_in_json_form(env: Env) -> None:
    s = env.state()
    when = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    await s.set("when", when)
    assert await s.get("when") == "2025-01-02T03:04:05Z"
    assert await s.get("when", dt.datetime) == when
    await s.set("tuple", (1, 2))
    assert await s.get("tuple") == [1, 2]
    await s.set("model", Item(name="w", count=1))
    assert await s.get("model") == {"name": "w", "count": 1}
    await s.set("uuid", uuid.UUID(int=1))
    assert await s.get("uuid") == "00000000-0000-0000-0000-000000000001"
    await s.set("intkeys", {1: "a"})
    assert await s.get("intkeys") == {"1": "a"}


async def test_no_shared_identity(env: Env) -> None:
    s = env.state()
    original = {"list": [1, 2]}
    await s.set("obj", original)
    original["list"].append(3)
    first = await s.get("obj")
    assert first == {"list": [1, 2]}
    first["list"].append(99)
    second = await s.get("obj")
    assert second == {"list": [1, 2]} and second is not first


async def test_get_with_model(env: Env) -> None:
    s = env.state()
    await s.set("item", {"name": "Widget", "count": 42})
    item = await s.get("item", Item)
    assert item == Item(name="Widget", count=42)
    assert await s.get("absent", Item) is None
    assert await s.get("item", TypeAdapter(dict[str, Any])) == {"name": "Widget", "count": 42}
    await s.set("nums", [1, 2, 3])
    assert await s.get("nums", list[int]) == [1, 2, 3]
    with pytest.raises(pydantic.ValidationError):
        await s.get("nums", Item)
    assert await s.take("item", Item) == Item(name="Widget", count=42)
    assert await s.get("item") is None


# --------------------------------------------------------------------------- serialization
class _Node:
    pass


def _cycle() -> Any:
    a: list[Any] = []
    a.append(a)
    return a


def _dict_cycle() -> Any:
    d: dict[str, Any] = {}
    d["self"] = d
    return d


BAD_VALUES: list[Any] = [
    b"bytes",
    bytearray(b"x"),
    {"nested": b"bytes"},
    _cycle(),
    _dict_cycle(),
    len,  # a builtin function
    lambda: 1,
    _Node(),
    float("nan"),
    float("inf"),
    [1.0, -math.inf],
    {("tuple", "key"): 1},
]


@pytest.mark.parametrize("value", BAD_VALUES, ids=range(len(BAD_VALUES)))
async def test_non_json_values_raise_before_writing(env: Env, value: Any) -> None:
    s = env.state()
    await s.set("k", "before")
    with pytest.raises(SerializationError):
        await s.set("k", value)
    with pytest.raises(SerializationError):
        await s.set_many({"other": 1, "k": value})
    assert await s.get("k") == "before"
    assert await s.get("other") is None


# -------------------------------------------------------------------------- key grammar
BAD_KEYS: list[Any] = [
    "",
    "item:123",
    "a b",
    "a..b",
    "../etc",
    "x/..",
    "a\n",
    "a\x00",
    "é",
    "a*",
    "k" * 1025,
    None,
    123,
    b"bytes",
]


@pytest.mark.parametrize("key", BAD_KEYS, ids=range(len(BAD_KEYS)))
async def test_bad_keys_rejected_on_every_call(env: Env, key: Any) -> None:
    s = env.state()
    await s.set("good", 1)
    calls: list[Any] = [
        lambda: s.get(key),
        lambda: s.get(key, Item),
        lambda: s.set(key, 1),
        lambda: s.delete(key),
        lambda: s.take(key),
        lambda: s.get_many(["good", key]),
        lambda: s.set_many({"fresh": 1, key: 2}),
        lambda: s.delete_many(["good", key]),
    ]
    if key != "":  # the empty prefix means "all keys"
        calls.append(lambda: s.list(key))
    for call in calls:
        with pytest.raises(ValidationError):
            await call()
    assert await s.get("good") == 1  # the batch delete did not run
    assert await s.get("fresh") is None  # the batch set did not run


async def test_longest_and_odd_but_legal_keys(env: Env) -> None:
    s = env.state()
    keys = ["k" * 1024, "a.b", "-", "_", "/", "/a//b/", "A-Z_0.9", "."]
    await s.set_many({k: k for k in keys})
    assert await s.get_many(keys) == {k: k for k in keys}
    page = await s.list(limit=100)
    assert [i.key for i in page.items] == sorted(keys)


async def test_a_single_string_is_not_a_key_list(env: Env) -> None:
    s = env.state()
    with pytest.raises(ValidationError):
        await s.get_many("abc")
    with pytest.raises(ValidationError):
        await s.delete_many("abc")


# --------------------------------------------------------------------------------- TTL
@pytest.mark.parametrize("ttl", [0, -1, math.nan, math.inf, "1", True])
async def test_bad_ttl_rejected(env: Env, ttl: Any) -> None:
    s = env.state()
    with pytest.raises(ValidationError):
        await s.set("k", 1, ttl=ttl)
    with pytest.raises(ValidationError):
        await s.set_many({"k": 1}, ttl=ttl)
    assert await s.get("k") is None


async def test_ttl_expiry_hides_from_every_read(env: Env) -> None:
    s = env.state()
    ttl = 0.4
    await s.set("gone/1", "a", ttl=ttl)
    await s.set_many({"gone/2": "b", "gone/3": "c"}, ttl=ttl)
    await s.set("stays", "x", ttl=3600)
    await s.set("forever", "y")
    assert await s.get("gone/1") == "a"
    assert [i.key for i in (await s.list("gone/")).items] == ["gone/1", "gone/2", "gone/3"]
    await env.advance(ttl + 0.4)
    assert await s.get("gone/1") is None
    assert await s.get_many(["gone/1", "gone/2", "stays"]) == {"stays": "x"}
    assert (await s.list("gone/")).items == []
    assert [i.key for i in (await s.list()).items] == ["forever", "stays"]
    assert await s.take("gone/2") is None
    assert await s.delete("gone/3") is False
    assert await s.delete_many(["gone/1", "gone/2", "gone/3", "stays"]) == 1


async def test_overwrite_replaces_ttl(env: Env) -> None:
    s = env.state()
    await s.set("k", 1, ttl=0.3)
    await s.set("k", 2)  # no TTL any more
    await s.set("j", 1)
    await s.set("j", 2, ttl=0.3)  # now expires
    await env.advance(0.7)
    assert await s.get("k") == 2
    assert await s.get("j") is None
    await s.set("j", 3)  # an expired key can be written again
    assert await s.get("j") == 3


# ------------------------------------------------------------------------ delete / take
async def test_delete_and_delete_many_counts(env: Env) -> None:
    s = env.state()
    await s.set_many({"a": 1, "b": 2, "c": 3})
    assert await s.delete("a") is True
    assert await s.delete("a") is False
    assert await s.delete_many(["b", "b", "c", "zz"]) == 2
    assert await s.delete_many([]) == 0
    assert await s.get_many(["a", "b", "c"]) == {}


async def test_take_reads_once(env: Env) -> None:
    s = env.state()
    await s.set("consent/1", {"op": "delete"})
    assert await s.take("consent/1") == {"op": "delete"}
    assert await s.take("consent/1") is None
    assert await s.get("consent/1") is None


async def test_hundred_concurrent_takes_exactly_one_wins(env: Env) -> None:
    clients = env.clients(4)
    tenant = "take-" + uuid.uuid4().hex
    states = [ContextState(c, tenant) for c in clients]
    for round_ in range(3):
        await states[0].set("once", {"round": round_})
        results = await asyncio.gather(*(states[i % len(states)].take("once") for i in range(100)))
        winners = [r for r in results if r is not None]
        assert winners == [{"round": round_}]


async def test_batches(env: Env) -> None:
    s = env.state()
    items = {f"item/{i:03d}": {"n": i} for i in range(120)}
    await s.set_many(items)
    got = await s.get_many([*items, "item/missing"])
    assert got == items
    await s.set_many({})
    assert await s.get_many([]) == {}
    assert await s.delete_many(list(items)[:60]) == 60
    assert len(await s.get_many(list(items))) == 60


# --------------------------------------------------------------------------------- list
async def _walk(s: ContextState, prefix: str = "", limit: int = 3) -> list[StateItem]:
    out: list[StateItem] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await s.list(prefix, cursor=cursor, limit=limit)
        assert isinstance(page, StatePage)
        assert len(page.items) <= limit
        out.extend(page.items)
        pages += 1
        assert pages < 1000
        if page.next_cursor is None:
            return out
        assert len(page.items) == limit
        cursor = page.next_cursor


async def test_list_pages_in_byte_order_with_prefix(env: Env) -> None:
    s = env.state()
    keys = ["a/1", "a/2", "a/10", "a/B", "a/_", "a/-", "a/.", "a/b/c", "a0", "ab", "a", "b/1", "A/1"]
    await s.set_many({k: {"k": k} for k in keys})
    everything = await _walk(s, "", limit=4)
    assert [i.key for i in everything] == sorted(keys)
    assert all(i.value == {"k": i.key} for i in everything)
    under_a = await _walk(s, "a/", limit=2)
    assert [i.key for i in under_a] == sorted(k for k in keys if k.startswith("a/"))
    assert [i.key for i in await _walk(s, "a", limit=100)] == sorted(k for k in keys if k.startswith("a"))
    assert await _walk(s, "zzz") == []


async def test_list_last_page_has_no_cursor(env: Env) -> None:
    s = env.state()
    await s.set_many({f"p/{i}": i for i in range(4)})
    first = await s.list("p/", limit=2)
    assert [i.key for i in first.items] == ["p/0", "p/1"] and first.next_cursor
    second = await s.list("p/", cursor=first.next_cursor, limit=2)
    assert [i.key for i in second.items] == ["p/2", "p/3"]
    assert second.next_cursor is None
    whole = await s.list("p/", limit=4)
    assert len(whole.items) == 4 and whole.next_cursor is None
    assert (await s.list("q/")).next_cursor is None


@pytest.mark.parametrize("limit", [0, -1, 1001, 2.5, "10", True])
async def test_list_bad_limit(env: Env, limit: Any) -> None:
    with pytest.raises(ValidationError):
        await env.state().list(limit=limit)


async def test_cursor_is_bound_to_tenant_and_prefix(env: Env) -> None:
    alice, mallory = env.state("alice"), env.state("mallory")
    await alice.set_many({f"doc/{i}": i for i in range(5)})
    await mallory.set_many({f"doc/{i}": -i for i in range(5)})
    page = await alice.list("doc/", limit=2)
    cursor = page.next_cursor
    assert cursor
    # another tenant, another prefix, or a tampered cursor is refused, never served
    with pytest.raises(InvalidCursorError):
        await mallory.list("doc/", cursor=cursor, limit=2)
    with pytest.raises(InvalidCursorError):
        await alice.list("do", cursor=cursor, limit=2)
    with pytest.raises(InvalidCursorError):
        await alice.list("", cursor=cursor, limit=2)
    body, tag = cursor.split(".")
    forged = [
        "",
        "garbage",
        "a.b.c",
        body + "." + tag[:-2] + ("AA" if tag[-2:] != "AA" else "BB"),
        "ZG9jLzQ." + tag,  # "doc/4" with the tag of another key
        body + ".",
        "!!!." + tag,
        "x" * 5000,
    ]
    for bad in forged:
        with pytest.raises(InvalidCursorError):
            await alice.list("doc/", cursor=bad, limit=2)
    # a cursor from another process key (e.g. another deployment) is refused too
    other = ContextState(env.backend, "alice", cursor_key=b"k" * 32)
    with pytest.raises(InvalidCursorError):
        await other.list("doc/", cursor=cursor, limit=2)
    rest = await alice.list("doc/", cursor=cursor, limit=10)
    assert [i.value for i in rest.items] == [2, 3, 4]


async def test_walk_with_concurrent_writes_never_skips_or_repeats(env: Env) -> None:
    s = env.state()
    stable = [f"k/{i:03d}" for i in range(0, 60, 2)]
    await s.set_many(dict.fromkeys(stable, 0))
    seen: list[str] = []
    cursor: str | None = None
    n = 0
    while True:
        page = await s.list("k/", cursor=cursor, limit=4)
        seen.extend(i.key for i in page.items)
        # churn between pages: add odd keys, delete and re-add some, expire none
        await s.set(f"k/{(n * 7) % 60:03d}" if (n * 7) % 2 else f"k/{(n * 7 + 1) % 60:03d}", 1)
        await s.delete(f"k/{(n * 5 + 1) % 60:03d}")
        n += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)), "a key was repeated"
    assert seen == sorted(seen)
    assert set(stable) <= set(seen), "a key present during the whole walk was skipped"


# ------------------------------------------------------------------------------ tenants
async def test_tenant_isolation_under_every_operation(env: Env) -> None:
    a, b = env.state("tenant-a"), env.state("tenant-b")
    await a.set("shared/key", "A")
    await b.set("shared/key", "B")
    await a.set_many({"only/a": 1, "shared/many": "A"})
    assert await a.get("shared/key") == "A" and await b.get("shared/key") == "B"
    assert await b.get("only/a") is None
    assert await b.get_many(["only/a", "shared/key"]) == {"shared/key": "B"}
    assert [i.key for i in (await b.list()).items] == ["shared/key"]
    assert await b.take("only/a") is None
    assert await b.delete("only/a") is False
    assert await b.delete_many(["only/a", "shared/many"]) == 0
    assert await a.get_many(["only/a", "shared/many"]) == {"only/a": 1, "shared/many": "A"}
    assert await b.take("shared/key") == "B"
    assert await a.get("shared/key") == "A"


@pytest.mark.parametrize(
    ("tenant_a", "tenant_b", "key_a", "key_b"),
    [
        ("a", "a/b", "b/x", "x"),  # "t/a/b/x" must not equal tenant "a/b"'s "x"
        ("a", "ab", "x", "x"),
        ("a%2Fb", "a/b", "x", "x"),
        ("../b", "b", "x", "x"),
        ("", "x", "x", "x"),
    ],
)
async def test_tenant_names_cannot_alias(env: Env, tenant_a: str, tenant_b: str, key_a: str, key_b: str) -> None:
    if tenant_a == "":
        with pytest.raises(TenantRequiredError):
            await env.state("").get("x")
        return
    a, b = env.state(tenant_a), env.state(tenant_b)
    await a.set(key_a, "A")
    assert await b.get(key_b) is None
    assert (await b.list()).items == []
    assert (await b.list(key_b[:1])).items == []
    await b.set(key_b, "B")
    assert await a.get(key_a) == "A"
    assert [i.key for i in (await a.list()).items] == [key_a]


async def test_no_tenant_fails_closed(env: Env) -> None:
    s = ContextState(env.backend, None)
    assert s.tenant_id is None
    calls: list[Any] = [
        s.get("k"),
        s.get("k", Item),
        s.set("k", 1),
        s.delete("k"),
        s.take("k"),
        s.get_many(["k"]),
        s.set_many({"k": 1}),
        s.delete_many(["k"]),
        s.list(),
    ]
    for call in calls:
        with pytest.raises(TenantRequiredError):
            await call


async def test_thousand_concurrent_ops_across_ten_tenants(env: Env) -> None:
    clients = env.clients(3)
    tenants = [f"tenant-{i}-{uuid.uuid4().hex[:6]}" for i in range(10)]

    async def one(i: int) -> None:
        tenant = tenants[i % 10]
        s = ContextState(clients[i % len(clients)], tenant)
        key = f"k/{(i // 10) % 25}"  # the same 25 keys in every tenant, on purpose
        await s.set(key, {"tenant": tenant, "i": i})
        got = await s.get(key)
        assert got is not None and got["tenant"] == tenant

    await asyncio.gather(*(one(i) for i in range(1000)))
    for tenant in tenants:
        page = await ContextState(env.backend, tenant).list(limit=100)
        assert len(page.items) == 25
        assert {item.value["tenant"] for item in page.items} == {tenant}
