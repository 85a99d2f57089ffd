"""The per-call fast paths take the same decisions as the slow paths they skip.

Each fast path of the hot path (issue 12) is held here against its slow twin: the duplicate-key
check's token count against the strict re-parse, the encoded ``tools/list`` pages against a
fresh encoding, the body deadline against ``asyncio.timeout``'s accounting.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import re
import sys
from types import FrameType

import pytest
from conftest import Wire, final_message, make_app, make_router, open_client
from starlette.requests import Request

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx._auth.host_rules import loopback_security
from fastapi_mcp_ctx._server import http as _http
from fastapi_mcp_ctx._server.first_step import first_step
from fastapi_mcp_ctx._server.http import _parse_accept, _read_before, accepted  # pyright: ignore[reportPrivateUsage]
from fastapi_mcp_ctx._wire.envelope import _decode_header_value, decode_header_value, encode_header_value, header_map  # pyright: ignore[reportPrivateUsage]
from fastapi_mcp_ctx._wire.jsonrpc import EncodedResult, _each_key_once, dumps, parse_message, result_message  # pyright: ignore[reportPrivateUsage]
from fastapi_mcp_ctx._wire.memo import HeaderNames
from fastapi_mcp_ctx._wire.number_range import may_overflow
from fastapi_mcp_ctx.errors import (
    HeaderMismatchError,
    HostNotAllowedError,
    InvalidParamsError,
    InvalidRequestError,
    OriginNotAllowedError,
    PayloadTooLargeError,
)


def _strict_refuses(body: bytes) -> bool:
    """The slow path's verdict: a key repeated in the message, params, _meta or arguments."""
    repeated = False

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal repeated
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys) and {"jsonrpc", "name", "a", "progressToken"} & set(keys):
            repeated = True
        return dict(items)

    json.loads(body, object_pairs_hook=pairs)
    return repeated


_PIECES = ['"a":1', '"a":2', '"b":"a"', '"name":"a"', '"c":{"a":1}', '"d":["a","a"]']


@pytest.mark.parametrize("combo", list(itertools.permutations(_PIECES, 3)))
def test_duplicate_key_fast_path_agrees_with_the_strict_parse(combo: tuple[str, ...]) -> None:
    arguments = "{" + ",".join(combo) + "}"
    body = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":' + arguments + "}}").encode()
    refused = _strict_refuses(body)
    if refused:
        with pytest.raises(InvalidRequestError, match="Duplicate key"):
            parse_message(body)
    else:
        assert parse_message(body).params["arguments"] == json.loads(arguments)  # type: ignore[union-attr]


def test_the_fast_path_answers_alone_only_when_no_string_repeats() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}'
    assert _each_key_once(body, json.loads(body))
    again = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":"a"}}}'
    assert _each_key_once(again, json.loads(again))  # "a" also a value: the walk finds both, nothing dropped
    assert parse_message(again).params["arguments"] == {"a": "a"}  # type: ignore[union-attr]
    twice = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":"a","a":1}}}'
    assert not _each_key_once(twice, json.loads(twice))  # the parser kept one "a": the strict re-read decides
    with pytest.raises(InvalidRequestError):
        parse_message(twice)


_ENVELOPE_PIECES = ['"name":"t"', '"name":"é"', '"version":"t"', '"c":{"name":"t"}', '"name":"t","name":"u"']


@pytest.mark.parametrize("combo", list(itertools.permutations(_ENVELOPE_PIECES, 2)))
def test_a_2026_envelope_repeating_a_name_agrees_with_the_strict_parse(combo: tuple[str, ...]) -> None:
    """clientInfo.name beside params.name (every 2026 tools/call): counted on the re-encoded message."""
    info = "{" + ",".join(combo) + "}"
    meta = '{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":' + info + "}"
    body = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"é":1},"_meta":' + meta + "}}").encode()
    # served whatever clientInfo holds (repeats inside it are not in a checked object), as the stdlib reads it
    assert parse_message(body).params == json.loads(body)["params"]  # type: ignore[union-attr]
    twice = body.replace(b'{"name":"t",', b'{"name":"t","name":"t",', 1)  # params.name really twice
    with pytest.raises(InvalidRequestError, match="Duplicate key 'name' in the params object"):
        parse_message(twice)


_LONG_DIGITS = re.compile(rb"[0-9]{200}")
_BIG_EXPONENT = re.compile(rb"[eE][+-]?[0-9]{3}")
_NUMBERS = [b"1e400", b"1E+400", b"1e-400", b"1e40", b"1E-99", b"2e+0001", b"1" * 199, b"9" * 200, b"1.5", b"-0", b"e1000"]


@pytest.mark.parametrize("number", _NUMBERS)
def test_may_overflow_answers_as_the_two_regular_expressions(number: bytes) -> None:
    short = (number, b'{"a":' + number + b',"b":"2026-07-28","e":"E+12"}', b'["x' + number + b'"]')
    for body in (*short, *(b" " * 200 + body for body in short)):  # both ways: regex below 160 bytes, translated above
        expected = _LONG_DIGITS.search(body) is not None or _BIG_EXPONENT.search(body) is not None
        assert may_overflow(body) is expected, body


# -- tools/list: encoded once per registry version, era and page ---------------------------------


async def test_tools_list_bytes_are_the_fresh_encoding_and_follow_registry_changes() -> None:
    router = make_router(page_size=2)
    for name in ("one", "two", "three"):
        _add_tool(router, name)
    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        await wire.initialize()
        for era in ("legacy", "modern"):
            first = await (wire.legacy("tools/list", {}, request_id="x") if era == "legacy" else wire.modern("tools/list", {}, request_id=7))
            again = await (wire.legacy("tools/list", {}, request_id=8) if era == "legacy" else wire.modern("tools/list", {}, request_id="y"))
            body = final_message(first)
            assert first.content == dumps(body) and final_message(again)["result"] == body["result"]  # same page, its own id
            assert [t["name"] for t in body["result"]["tools"]] == ["one", "two"]
            cursor = body["result"]["nextCursor"]
            second = await (wire.legacy("tools/list", {"cursor": cursor}) if era == "legacy" else wire.modern("tools/list", {"cursor": cursor}))
            assert [t["name"] for t in final_message(second)["result"]["tools"]] == ["three"]
        _add_tool(router, "four")
        changed = final_message(await wire.legacy("tools/list", {"cursor": cursor}))
        assert [t["name"] for t in changed["result"]["tools"]] == ["three", "four"]


_LOOP_ASKS = ("get_running_loop", "_get_running_loop", "current_task", "get_event_loop", "getpid")


@pytest.mark.parametrize("in_session", [False, True])
async def test_a_tools_call_asks_for_the_event_loop_once(in_session: bool) -> None:
    """Python 3.11's ``get_running_loop()`` and ``current_task()`` make a ``getpid`` system call
    each: the endpoint asks once a request, keeps the loop in the scope (``_context.event_loop``)
    and the call reads it there (its task looked up with the loop given); no ``os.getpid`` a call."""
    router = make_router(session_mode="auto")  # a session when the request names one
    _add_tool(router, "one")
    asked: collections.Counter[str] = collections.Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        name = getattr(arg, "__name__", "")
        if event == "c_call" and name in _LOOP_ASKS and "fastapi_mcp_ctx" in frame.f_code.co_filename:
            asked[name] += 1

    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        if in_session:
            await wire.initialize()
        await wire.legacy("tools/call", {"name": "one", "arguments": {"a": 1}}, session=wire.session)  # first use
        sys.setprofile(profile)
        try:
            response = await wire.legacy("tools/call", {"name": "one", "arguments": {"a": 2}}, session=wire.session)
        finally:
            sys.setprofile(None)
    message = final_message(response)
    assert "result" in message and message["result"]["structuredContent"] == {"result": 2}, response.text
    assert asked["getpid"] == 0 and asked["get_event_loop"] == 0 and asked["_get_running_loop"] == 0, asked
    assert asked["current_task"] <= 1, asked  # CallScope's task, the loop given
    assert asked["get_running_loop"] == 1, asked  # the endpoint's own, and only it


def test_tools_call_is_in_every_eras_method_table() -> None:
    """``Dispatcher.serve`` runs ``tools/call`` before computing the era's method table: the
    tables it skips must all contain it, with features registered or not."""
    router = make_router()

    def tables() -> list[frozenset[str]]:
        return [router.dispatcher._table(era) for era in ("legacy", "modern")]  # pyright: ignore[reportPrivateUsage]

    assert all("tools/call" in table for table in tables())

    @router.prompt()
    async def hello() -> str:
        """Say hello."""
        return "hello"

    assert all("tools/call" in table and "prompts/get" in table for table in tables())


def _add_tool(router: McpRouter, name: str) -> None:
    async def tool(a: int) -> int:
        """A tool."""
        return a

    tool.__name__ = name
    router.add_tool(tool)


# -- the body deadline: asyncio.timeout's accounting without its cost --------------------------------


def _stalled_request() -> Request:
    async def receive() -> dict[str, object]:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    return Request({"type": "http", "method": "POST", "headers": [], "fastapi_mcp_ctx.lean": True}, receive)


async def test_the_body_deadline_raises_timeout_and_leaves_the_task_uncancelled() -> None:
    task = asyncio.current_task()
    assert task is not None
    before = task.cancelling()
    with pytest.raises(TimeoutError):
        await _read_before(task, 0.05, _stalled_request(), 100)
    assert task.cancelling() == before
    await asyncio.sleep(0)  # the task is not cancelled any more


async def test_a_cancellation_from_outside_the_body_read_still_propagates() -> None:
    async def read() -> bytes:
        task = asyncio.current_task()
        assert task is not None
        return await _read_before(task, 5.0, _stalled_request(), 100)

    reading = asyncio.get_running_loop().create_task(read())
    await asyncio.sleep(0.02)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading


# -- the front door's remembered answers ----------------------------------------------------------


def test_an_admitted_host_and_origin_pair_admits_no_other_pair() -> None:
    security = loopback_security()
    security.check({"host": "127.0.0.1:8000"})
    security.check({"host": "127.0.0.1:8000"})  # remembered
    with pytest.raises(OriginNotAllowedError):
        security.check({"host": "127.0.0.1:8000", "origin": "http://evil.example"})
    with pytest.raises(HostNotAllowedError):
        security.check({"host": "evil.example"})
    with pytest.raises(HostNotAllowedError):
        security.check({})
    for port in range(1000, 1100):  # the memory is bounded; what it forgets is judged again
        security.check({"host": f"localhost:{port}"})
    assert len(security.admitted) == 64
    with pytest.raises(HostNotAllowedError):
        security.check({"host": "evil.example"})


@pytest.mark.parametrize(
    "accept",
    ["application/json, text/event-stream", "text/event-stream", "application/json;q=0, text/event-stream", "*/*", "text/html"],
)
def test_a_remembered_accept_answer_is_the_parsed_one(accept: str) -> None:
    headers = header_map([(b"accept", accept.encode())])
    assert accepted(headers) == accepted(headers) == _parse_accept(accept)


def test_header_map_keeps_the_last_value_and_names_repeated_headers() -> None:
    headers = header_map([(b"Host", b"a"), (b"x-one", b"1"), (b"host", b"b")])
    assert headers == {"host": "b", "x-one": "1"} and headers.repeated == {"host"}
    assert header_map([(b"host", b"a")]).repeated == set()


@pytest.mark.parametrize(
    "raw",
    [
        [],
        [(b"Host", b"127.0.0.1"), (b"ACCEPT", b"application/json, text/event-stream"), (b"x-\xc0", b"\xe9t\xe9")],
        [(b"a", b"line\nfeed"), (b"b", b"")],  # the separator inside a value: the per-header path
        [(b"a\nb", b"1")],
        [(b"", b""), (b"x", b"\x00")],
        [(b"dup", b"1"), (b"DUP", b"2"), (b"dup", b"3")],
    ],
)
def test_header_map_decodes_latin_1_and_lowercases_every_name(raw: list[tuple[bytes, bytes]]) -> None:
    expected: dict[str, str] = {}
    for key, value in raw:
        expected[key.decode("latin-1").lower()] = value.decode("latin-1")
    assert header_map(raw) == expected and header_map(tuple(raw)) == expected and header_map(iter(raw)) == expected


def test_remembered_header_names_are_the_decoded_ones_and_bounded() -> None:
    names = HeaderNames(2)
    assert names[b"Host"] == "host" and names[b"X-\xc0"] == "x-\xe0" and names[b"third"] == "third"
    assert dict(names) == {b"Host": "host", b"X-\xc0": "x-\xe0"}  # full: the third decoded, not kept
    assert HeaderNames(8)[b"x" * 65] == "x" * 65 and len(names) == 2
    raw = [(bytearray(b"Host"), b"a"), (b"Accept", b"*/*")]  # a name that cannot be a key: decoded one by one
    assert header_map(raw) == {"host": "a", "accept": "*/*"}  # pyright: ignore[reportArgumentType]


# -- the body read's first step: the answer at once, the deadline only for a real wait ------------


async def test_first_step_gives_a_ready_result_at_once() -> None:
    async def ready() -> int:
        return 7

    assert first_step(ready()) == (7, None)


async def test_first_step_hands_a_real_wait_to_the_task_and_forwards_cancellation() -> None:
    gate = asyncio.Event()
    cleaned: list[str] = []

    async def waits() -> str:
        try:
            await gate.wait()
            return "arrived"
        finally:
            cleaned.append("finally")

    result, rest = first_step(waits())
    assert result is None and rest is not None
    asyncio.get_running_loop().call_later(0.01, gate.set)
    assert await rest == "arrived"

    gate.clear()
    _, rest = first_step(waits())
    assert rest is not None
    pending = rest

    async def await_rest() -> str:
        return await pending

    task = asyncio.get_running_loop().create_task(await_rest())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["finally", "finally"]  # the cancellation reached the awaitable itself


async def test_a_body_already_received_is_read_without_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_deadline(*_: object) -> bytes:
        raise AssertionError("the deadline was armed for a body that had arrived")

    monkeypatch.setattr(_http, "_read_before", no_deadline)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    request = Request({"type": "http", "method": "POST", "headers": [], "fastapi_mcp_ctx.lean": True}, receive)
    assert await _http.read_body(request, header_map([]), 100, 1.0) == b"{}"
    with pytest.raises(PayloadTooLargeError):
        await _http.read_body(request, header_map([]), 1, 1.0)


def test_an_encoded_result_that_gained_a_key_is_encoded_afresh() -> None:
    result = EncodedResult({"tools": []}, b'{"tools":[]}')
    assert dumps(result_message(1, result)) == b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'
    result["_meta"] = {"k": "v"}
    assert json.loads(dumps(result_message("x", result))) == {"jsonrpc": "2.0", "id": "x", "result": {"tools": [], "_meta": {"k": "v"}}}


@pytest.mark.parametrize("name", ["add", "naïve tool", " padded ", "=?base64?x?=", "a" * 300])
def test_a_remembered_header_value_is_the_decoded_one(name: str) -> None:
    raw = encode_header_value(name)
    for _ in range(3):  # first decode, then the remembered answer (values over 256 characters: never kept)
        assert decode_header_value(raw) == _decode_header_value(raw) == name


@pytest.mark.parametrize("raw", ["=?base64?bm9wZQ?=", "=?base64?//79?=", "bad\x01value"])
def test_a_refused_header_value_is_refused_every_time(raw: str) -> None:
    for _ in range(3):
        with pytest.raises(HeaderMismatchError):
            decode_header_value(raw)


def test_the_bounded_memo_stops_at_its_bounds_and_never_keeps_a_refusal() -> None:
    from fastapi_mcp_ctx._wire.memo import BoundedMemo

    calls: list[str] = []

    def judge(key: str) -> int:
        calls.append(key)
        if key.startswith("bad"):
            raise ValueError(key)
        return len(key)

    memo = BoundedMemo[int](2, max_key_chars=5)
    assert [memo.get(k, judge) for k in ("a", "a", "bb", "ccc", "ccc")] == [1, 1, 2, 3, 3]
    assert len(memo) == 2 and calls == ["a", "bb", "ccc", "ccc"]  # full at two: "ccc" judged each time
    long = BoundedMemo[int](10, max_key_chars=5)
    long.get("abcdef", judge)
    assert len(long) == 0  # a key over max_key_chars is never kept
    for _ in range(2):
        with pytest.raises(ValueError):
            long.get("bad", judge)
    assert calls.count("bad") == 2 and len(long) == 0


@pytest.mark.parametrize("name", ["add", "Infinity", "NaN-Infinity"])
@pytest.mark.parametrize("value", ["2", "1e400", "-1E+999", "1" * 320 + ".5"])
def test_the_overflow_filter_on_the_re_encoded_message_finds_what_the_walk_finds(name: str, value: str) -> None:
    """parse_message finds an overflowed number from the re-encoded message (``Infinity``); the
    word inside a string only sends the body to the walk, which finds nothing there."""
    body = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' + name + '","arguments":{"a":' + value + "}}}").encode()
    message = parse_message(body)
    overflows = may_overflow(body)
    assert message.out_of_range == (("a",) if overflows else ())  # type: ignore[union-attr]
    outside = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' + name + '","x":' + value + ',"arguments":{}}}').encode()
    if overflows:
        with pytest.raises(InvalidParamsError, match=r"params\.x: number out of range"):
            parse_message(outside)
    else:
        assert parse_message(outside).params["x"] == json.loads(value)  # type: ignore[union-attr]
