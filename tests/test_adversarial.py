"""Adversarial input against the MCP endpoint, both eras.

Each test asserts the RIGHT behaviour. Tests in the "faults" sections fail against the
current code (they document bugs found by an adversarial pass); the "correct" sections
pin down hostile inputs that are already handled well (typed JSON-RPC error, right HTTP
status, no 500, no hang, no traceback text in the response).

Everything runs in process (``httpx.ASGITransport`` on ``http://127.0.0.1``, or a raw ASGI
call when the input cannot be expressed through httpx: duplicate ``Host``, non-ASCII header
bytes, a request body that never finishes).
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import anyio
import httpx
import pytest
from conftest import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    SessionClock,
    Wire,
    asgi_exchange,
    assert_error,
    final_message,
    make_app,
    make_router,
    messages_of,
    modern_meta,
    open_client,
    result_of,
    rpc,
    tool_text,
)
from fastapi import Depends, Request
from pydantic import Field

from fastapi_mcp_ctx import Context, mcp_context

MAX_BODY = 64 * 1024


def build_app(**settings: Any) -> Any:
    router = make_router(max_body_bytes=MAX_BODY, **settings)

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @router.tool()
    async def slow(delay_ms: int = 0, ctx: Context = Depends(mcp_context)) -> str:
        """Report progress, sleep, answer."""
        await ctx.report_progress(0, 1, "start")
        await anyio.sleep(delay_ms / 1000)
        return f"done {ctx.session_id}"

    @router.tool()
    async def echo_body(request: Request) -> str:
        """Return the first bytes of the HTTP body that carried this call."""
        return (await request.body()).decode()[:40]

    @router.tool()
    async def regional(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """A string argument mirrored in Mcp-Param-Region."""
        return region

    @router.tool()
    async def shard(shard: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Shard"})]) -> int:
        """An integer argument mirrored in Mcp-Param-Shard."""
        return shard

    app = make_app(router)
    app.state.mcp_router = router
    return app


@pytest.fixture
def app() -> Any:
    return build_app()


def lh(wire: Wire) -> dict[str, str]:
    return {"mcp-session-id": wire.session or "", "mcp-protocol-version": LEGACY}


def mh(method: str = "tools/list", name: str | None = None) -> dict[str, str]:
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


def modern_body(method: str = "tools/list", params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    return rpc(method, {**(params or {}), "_meta": modern_meta()}, request_id)


def no_internals(response: httpx.Response) -> None:
    """No stack trace or internal detail leaks into an error body."""
    text = response.text
    for marker in ("Traceback", 'File "', "fastapi_mcp_ctx/", "Error:", "Exception"):
        assert marker not in text, f"internal detail {marker!r} in response: {text[:300]}"


async def raw_asgi(
    app: Any,
    method: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    *,
    more_body_after: bool = False,
    timeout: float = 1.5,
) -> tuple[int | None, bytes]:
    """One ASGI call with exactly ``headers`` (duplicates, raw bytes kept).

    ``more_body_after``: announce more body after ``body`` and never send it (a client that
    stalls). Returns ``(status, body)``; status None when no response started in ``timeout``.
    """
    status: int | None = None
    chunks: list[bytes] = []
    started = anyio.Event()
    finished = anyio.Event()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more_body_after}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            started.set()
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 54321),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            try:
                await app(scope, receive, send)
            finally:
                finished.set()

        tg.start_soon(run)
        with anyio.move_on_after(timeout):
            await finished.wait()
        tg.cancel_scope.cancel()
    return status, b"".join(chunks)


def post_headers(extra: list[tuple[bytes, bytes]] | None = None, *, host: bytes | None = b"127.0.0.1") -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", b"application/json"), (b"accept", ACCEPT_BOTH.encode())]
    if host is not None:
        headers.insert(0, (b"host", host))
    return headers + list(extra or [])


MODERN_LIST = json.dumps(modern_body()).encode()
MODERN_LIST_HEADERS = [(b"mcp-protocol-version", MODERN.encode()), (b"mcp-method", b"tools/list")]


# =========================================================================================
# FAULTS: these assert the right behaviour and fail against the current implementation.
# =========================================================================================

# -- F1: Mcp-Param-* check crashes on an integer too large for a float ---------------------


async def test_fault_mcp_param_with_huge_integer_argument_is_header_mismatch(wire: Wire) -> None:
    """``float(10**400)`` raises OverflowError in ``Dispatcher._check_header_params``: today
    this is HTTP 200 / -32603 Internal error plus a traceback in the server log."""
    response = await wire.modern(
        "tools/call",
        {"name": "regional", "arguments": {"region": 10**400}},
        headers={"mcp-param-region": "1"},
        request_id=11,
        check=False,
    )
    assert_error(response, 400, -32020, request_id=11)


async def test_fault_mcp_param_with_huge_integer_on_integer_param(wire: Wire) -> None:
    response = await wire.modern(
        "tools/call",
        {"name": "shard", "arguments": {"shard": 10**400}},
        headers={"mcp-param-shard": str(10**400)},
        request_id=12,
        check=False,
    )
    # Header and body agree exactly: the call may run (isError for some other reason is
    # fine), but it must never be an internal error.
    message = final_message(response)
    assert message.get("error", {}).get("code") != -32603, response.text
    assert response.status_code in (200, 400)


# -- F2: Mcp-Param-* integer comparison is by float(): different values "match" -----------


@pytest.mark.parametrize(
    ("value", "header"),
    [(2**53 + 1, str(2**53)), (10, "1_0"), (10, "1e1"), (10, "+10"), (10, "10."), (10, "0x0A")],
    ids=["float-precision", "underscore", "exponent", "plus-sign", "bare-point", "hex"],
)
async def test_fault_mcp_param_integer_must_match_exactly(wire: Wire, value: int, header: str) -> None:
    """An intermediary routes on the header; the tool must never run with a different value.
    A float comparison would let 9007199254740992 stand for
    9007199254740993 and accepts ``1_0``/``1e1`` for 10. (``10.0`` for 10 is a numeric match
    the spec asks servers to accept: see test_mcp_param_integer_compares_numerically.)"""
    response = await wire.modern(
        "tools/call",
        {"name": "shard", "arguments": {"shard": value}},
        headers={"mcp-param-shard": header},
        request_id=13,
        check=False,
    )
    assert_error(response, 400, -32020, request_id=13)


async def test_mcp_param_integer_compares_numerically(wire: Wire) -> None:
    """2026-07-28 Value Encoding: integers SHOULD compare numerically (``42`` == ``42.0``)."""
    response = await wire.modern(
        "tools/call", {"name": "shard", "arguments": {"shard": 10}}, headers={"mcp-param-shard": " 10.0"}
    )
    assert result_of(response)["structuredContent"] == {"result": 10}


async def test_mcp_param_integer_exact_match_is_accepted(wire: Wire) -> None:
    response = await wire.modern(
        "tools/call", {"name": "shard", "arguments": {"shard": 2**53 + 1}}, headers={"mcp-param-shard": str(2**53 + 1)}
    )
    assert response.status_code == 200
    assert result_of(response)["structuredContent"] == {"result": 2**53 + 1}


# -- F3: repeated singleton headers: the last value silently wins -------------------------


async def test_fault_duplicate_origin_with_a_foreign_origin_is_rejected(client: httpx.AsyncClient) -> None:
    """``header_map`` keeps the LAST value: ``Origin: evil`` then ``Origin: localhost`` passes."""
    headers = httpx.Headers(
        [
            ("content-type", "application/json"),
            ("accept", ACCEPT_BOTH),
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/list"),
            ("origin", "http://evil.example.test"),
            ("origin", "http://localhost:3000"),
        ]
    )
    response = await client.post("/mcp", content=MODERN_LIST, headers=headers)
    assert response.status_code in (400, 403), response.text
    assert "error" in response.json()


async def test_duplicate_origin_foreign_last_is_rejected(client: httpx.AsyncClient) -> None:
    headers = httpx.Headers(
        [
            ("content-type", "application/json"),
            ("accept", ACCEPT_BOTH),
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/list"),
            ("origin", "http://localhost:3000"),
            ("origin", "http://evil.example.test"),
        ]
    )
    response = await client.post("/mcp", content=MODERN_LIST, headers=headers)
    assert_error(response, 403, -32600)


async def test_fault_duplicate_host_with_a_foreign_host_is_rejected(app: Any) -> None:
    headers = [(b"host", b"evil.example.test"), *post_headers(MODERN_LIST_HEADERS, host=b"127.0.0.1")]
    status, body = await raw_asgi(app, "POST", headers, MODERN_LIST)
    assert status in (400, 421), body


async def test_fault_host_port_of_unicode_digits_is_rejected(app: Any) -> None:
    """``str.isdigit`` accepts ``²`` (latin-1 0xB2): ``Host: 127.0.0.1:²`` passes the allow-list."""
    status, body = await raw_asgi(app, "POST", post_headers(MODERN_LIST_HEADERS, host=b"127.0.0.1:\xb2"), MODERN_LIST)
    assert status == 421, body


async def test_fault_duplicate_session_id_is_rejected(wire: Wire) -> None:
    """Two ``Mcp-Session-Id`` headers: today the request silently runs on the last session."""
    first = await wire.initialize()
    second = await wire.initialize()
    headers = httpx.Headers(
        [
            ("content-type", "application/json"),
            ("accept", ACCEPT_BOTH),
            ("mcp-protocol-version", LEGACY),
            ("mcp-session-id", first),
            ("mcp-session-id", second),
        ]
    )
    response = await wire.client.post("/mcp", content=json.dumps(rpc("tools/list", None, 1)), headers=headers)
    assert_error(response, 400, -32600)


async def test_fault_duplicate_protocol_version_is_rejected_in_either_order(wire: Wire) -> None:
    """Modern-then-legacy is served in the 2025 era (200); legacy-then-modern is 400 -32020."""
    await wire.initialize()
    for order in ((MODERN, LEGACY), (LEGACY, MODERN)):
        headers = httpx.Headers(
            [
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
                ("mcp-session-id", wire.session or ""),
                ("mcp-protocol-version", order[0]),
                ("mcp-protocol-version", order[1]),
            ]
        )
        response = await wire.client.post("/mcp", content=json.dumps(rpc("tools/list", None, 1)), headers=headers)
        assert response.status_code == 400, (order, response.text)
        assert "error" in response.json()


async def test_fault_duplicate_content_type_is_rejected(wire: Wire) -> None:
    await wire.initialize()
    headers = httpx.Headers(
        [
            ("content-type", "text/plain"),
            ("content-type", "application/json"),
            ("accept", ACCEPT_BOTH),
            *lh(wire).items(),
        ]
    )
    response = await wire.client.post("/mcp", content=json.dumps(rpc("tools/list", None, 1)), headers=headers)
    assert response.status_code in (400, 415), response.text


# -- F4: a declared Content-Length over the limit is not refused up front ------------------


async def test_fault_declared_content_length_over_limit_is_413_without_waiting_for_body(app: Any) -> None:
    """A client declaring a 1 GB body and then stalling holds the request open forever
    (slowloris); the limit is only checked on bytes actually read."""
    headers = post_headers([*MODERN_LIST_HEADERS, (b"content-length", b"1000000000")])
    status, body = await raw_asgi(app, "POST", headers, b'{"jsonrpc":', more_body_after=True, timeout=20.0)
    assert status == 413, f"no early 413 (status {status}, body {body!r})"


# -- F5: a tool taking `request: Request` hangs on request.body() -----------------------


@pytest.mark.parametrize("era_name", ["legacy", "modern"])
async def test_fault_tool_reading_request_body_does_not_hang(wire: Wire, era_name: str) -> None:
    """The router reads the body through ``receive`` itself and never caches it on the
    Request; a tool's ``await request.body()`` then waits for a disconnect forever."""
    with anyio.fail_after(30):  # it hangs forever when broken
        response = await wire.call_tool(era_name, "echo_body", {}, check=False)
    assert response.status_code == 200
    assert tool_text(result_of(response)).startswith('{"jsonrpc"')


# -- F6: per-session live state is never freed when a session expires ----------------------


async def test_fault_live_session_companion_freed_after_idle_expiry() -> None:
    """White-box: ``LiveSessions`` entries (GET-stream queues, in-flight maps) are only
    removed on DELETE; sessions that expire by idleness leak them forever."""
    app = build_app(session_idle_seconds=60)
    router = app.state.mcp_router
    clock = SessionClock(router)
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize()
        await wire.call_tool("legacy", "add", {"a": 1, "b": 2})
        clock.advance(61)
        gone = await wire.legacy("tools/list", check=False)
        assert gone.status_code == 404
        # Any later request gives the server a chance to sweep.
        await wire.initialize()
        await wire.call_tool("legacy", "add", {"a": 1, "b": 2})
    assert len(router.live._live) <= 1, f"{len(router.live._live)} live companions for 1 live session"  # pyright: ignore[reportPrivateUsage]


# -- F7: two in-flight calls with the same id: cancellation bookkeeping breaks ------------


async def test_fault_duplicate_in_flight_id_keeps_cancellation_working(wire: Wire) -> None:
    """The first call's ``finally`` pops the id from ``in_flight``, which by then holds the
    SECOND call's signal: ``notifications/cancelled`` can no longer reach the second call.
    (Rejecting a duplicate in-flight id with -32600 would be equally right.)"""
    await wire.initialize()
    results: dict[str, httpx.Response] = {}

    async def call(tag: str, delay: int) -> None:
        results[tag] = await wire.legacy(
            "tools/call", {"name": "slow", "arguments": {"delay_ms": delay}}, request_id=7, check=False
        )

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "short", 50)
        await anyio.sleep(0.01)
        tg.start_soon(call, "long", 5000)
        with anyio.fail_after(30):  # the short call is done
            while "short" not in results:
                await anyio.sleep(0.01)
        note = await wire.post(rpc("notifications/cancelled", {"requestId": 7}, None), lh(wire))
        assert note.status_code == 202
    elapsed = time.monotonic() - started
    long_call = results["long"]
    message = final_message(long_call)
    duplicate_rejected = long_call.status_code == 400 and message.get("error", {}).get("code") == -32600
    cancelled = message.get("error", {}).get("code") == -32800 and elapsed < 4.5  # not the 5 s run
    assert duplicate_rejected or cancelled, f"second call ran to completion after cancel: {message!r} ({elapsed:.2f}s)"


# -- F8: Accept negotiation ------------------------------------------------------------


async def test_fault_accept_event_stream_only_never_gets_json(wire: Wire) -> None:
    """``Accept: text/event-stream`` alone: the answer must be SSE (or 406), not JSON."""
    response = await wire.post(modern_body(), {**mh(), "accept": "text/event-stream"})
    assert response.status_code == 406 or response.headers["content-type"].startswith("text/event-stream"), (
        response.status_code,
        response.headers.get("content-type"),
    )


async def test_fault_accept_with_q0_is_not_acceptable(wire: Wire) -> None:
    """``q=0`` means "not acceptable" (RFC 9110 §12.4.2)."""
    response = await wire.post(modern_body(), {**mh(), "accept": "application/json;q=0, text/event-stream;q=0"})
    assert_error(response, 406, -32600)


# -- F9: typed tool params are coerced (JSON Schema says integer) --------------------------


@pytest.mark.parametrize("value", [True, "1", "0x10"], ids=["bool", "numeric-string", "hex-string"])
async def test_fault_integer_argument_rejects_non_integers(wire: Wire, era: str, value: Any) -> None:
    """``inputSchema`` advertises ``"type": "integer"``; ``true`` and ``"1"`` are not
    integers in JSON Schema, yet pydantic's lax mode accepts them today."""
    response = await wire.call_tool(era, "add", {"a": value, "b": 1}, check=False)
    result = result_of(response)
    assert result.get("isError") is True, result


# =========================================================================================
# CORRECT: hostile inputs that are already handled right.
# =========================================================================================

PARSE_ERRORS = {
    "empty": b"",
    "whitespace": b" \r\n\t ",
    "nan-literal": b'{"jsonrpc":"2.0","id":NaN,"method":"tools/list"}',
    "infinity-in-args": b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":Infinity,"b":1}}}',
    "utf8-bom": b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    "utf16-bom": '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'.encode("utf-16"),
    "utf32": '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'.encode("utf-32"),
    "invalid-utf8": b'{"jsonrpc":"2.0","id":1,"method":"tools/list\xff"}',
    "lone-surrogate-escape": b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}',
    "trailing-garbage": b'{"jsonrpc":"2.0","id":1,"method":"tools/list"} x',
    "two-objects": b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
    "deep-brackets": b"[" * 60_000,
    "deep-braces": b'{"a":' * 10_000,
    "deep-valid-nesting": b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":' + b"[" * 5000 + b"]" * 5000 + b"}}",
}
# An integer of 5000 digits is valid JSON, judged as a value (-32600 as an id): test_outbound_faults.py


@pytest.mark.parametrize("body", list(PARSE_ERRORS.values()), ids=list(PARSE_ERRORS))
async def test_parse_errors_are_400_minus_32700_in_both_eras(wire: Wire, body: bytes) -> None:
    await wire.initialize()
    for headers in (lh(wire), mh(), {}):
        with anyio.fail_after(30):
            response = await wire.post(None, headers, content=body)
        assert_error(response, 400, -32700, request_id=None)
        no_internals(response)


@pytest.mark.parametrize(
    "bad_id", [None, True, False, 1.0, -0.0, 1e300, {"a": 1}, [1]], ids=["null", "true", "false", "1.0", "-0.0", "1e300", "object", "array"]
)
async def test_invalid_ids_are_400_minus_32600_in_both_eras(wire: Wire, bad_id: Any) -> None:
    await wire.initialize()
    legacy = await wire.post({"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"}, lh(wire))
    assert_error(legacy, 400, -32600, request_id=None)
    body = modern_body()
    body["id"] = bad_id
    modern = await wire.post(body, mh())
    assert_error(modern, 400, -32600, request_id=None)


async def test_overflowing_float_id_is_invalid_request(wire: Wire) -> None:
    await wire.initialize()
    for headers in (lh(wire), mh()):
        response = await wire.post(None, headers, content=b'{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}')
        assert_error(response, 400, -32600, request_id=None)


@pytest.mark.parametrize("request_id", [2**64 + 1, -(2**63) - 1, 10**300, "", "x" * 50_000, "\u2028\u0000é"], ids=repr)
async def test_odd_but_valid_ids_are_echoed_exactly(wire: Wire, era: str, request_id: Any) -> None:
    response = await wire.request(era, "tools/list", request_id=request_id)
    assert response.status_code == 200
    message = final_message(response)
    assert message["id"] == request_id and type(message["id"]) is type(request_id)


@pytest.mark.parametrize("method", [1, True, [], {}, 1.5], ids=repr)
async def test_non_string_method_is_invalid_request(wire: Wire, method: Any) -> None:
    await wire.initialize()
    response = await wire.post({"jsonrpc": "2.0", "id": 4, "method": method}, lh(wire))
    assert_error(response, 400, -32600, request_id=4)
    body = modern_body()
    body["method"] = method
    response = await wire.post(body, mh())
    assert_error(response, 400, -32600, request_id=1)


@pytest.mark.parametrize("params", ["s", [1], 0, False], ids=repr)
async def test_non_object_params_are_invalid_request_both_eras(wire: Wire, params: Any) -> None:
    await wire.initialize()
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
    assert_error(await wire.post(body, lh(wire)), 400, -32600, request_id=3)
    assert_error(await wire.post(body, mh("tools/call")), 400, -32600, request_id=3)


@pytest.mark.parametrize("arguments", ["x", [1], 5, True], ids=repr)
async def test_non_object_arguments_are_invalid_params(wire: Wire, arguments: Any) -> None:
    await wire.initialize()
    response = await wire.legacy("tools/call", {"name": "add", "arguments": arguments}, request_id=3, check=False)
    assert_error(response, 200, -32602, request_id=3)
    response = await wire.modern("tools/call", {"name": "add", "arguments": arguments}, request_id=4, check=False)
    assert_error(response, 400, -32602, request_id=4)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [({"a": 1.5, "b": 1}, "integer"), ({"a": None, "b": 1}, "integer"), ({}, "Field required"), ({"a": 1e308, "b": 1}, "")],
    ids=["fraction", "null", "missing", "1e308"],
)
async def test_invalid_typed_arguments_are_is_error_results(wire: Wire, era: str, arguments: Any, fragment: str) -> None:
    response = await wire.call_tool(era, "add", arguments)
    result = result_of(response)
    assert result["isError"] is True
    assert fragment in tool_text(result)


async def test_huge_integer_arguments_within_parser_limit_work(wire: Wire, era: str) -> None:
    big = int("9" * 4000)
    response = await wire.call_tool(era, "add", {"a": big, "b": big})
    assert result_of(response)["structuredContent"] == {"result": 2 * big}


async def test_body_over_limit_is_413_with_content_length(wire: Wire) -> None:
    body = json.dumps(modern_body("tools/list", {"pad": "a" * MAX_BODY})).encode()
    response = await wire.post(None, mh(), content=body)
    assert_error(response, 413, -32600)


async def test_body_over_limit_is_413_when_streamed_in_chunks(app: Any) -> None:
    chunks = [b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"'] + [b"a" * 8192] * 10 + [b'"}}']
    async with asgi_exchange(app, "POST", headers={"content-type": "application/json", "accept": ACCEPT_BOTH, **mh()}, body_chunks=chunks) as ex:
        await ex.wait_for(lambda e: e.done.is_set())
    assert ex.status == 413
    assert json.loads(ex.body)["error"]["code"] == -32600


async def test_body_exactly_at_limit_is_served(wire: Wire) -> None:
    prefix = json.dumps(modern_body("tools/list", {"pad": ""})).encode()
    body = prefix.replace(b'"pad": ""', b'"pad": "' + b"a" * (MAX_BODY - len(prefix)) + b'"')
    assert len(body) == MAX_BODY
    response = await wire.post(None, mh(), content=body)
    assert response.status_code == 200


@pytest.mark.parametrize(
    "content_type",
    [None, "", "text/plain", "application/jsonx", "application/json-patch+json", "multipart/form-data; boundary=x", "application/json, text/plain"],
    ids=repr,
)
async def test_wrong_content_type_is_415(wire: Wire, content_type: str | None) -> None:
    headers: dict[str, Any] = {**mh(), "content-type": content_type}
    if content_type is None:
        response = await wire.client.post("/mcp", content=MODERN_LIST, headers={"accept": ACCEPT_BOTH, **mh()})
    else:
        response = await wire.post(modern_body(), headers)
    assert_error(response, 415, -32600)


@pytest.mark.parametrize("accept", ["", "text/html", "application/jsonx, text/event-streamx", "x" * 10_000], ids=["empty", "html", "lookalike", "huge"])
async def test_unacceptable_accept_is_406(wire: Wire, accept: str) -> None:
    response = await wire.post(modern_body(), {**mh(), "accept": accept})
    assert_error(response, 406, -32600)


async def test_batches_are_invalid_request_in_both_eras(wire: Wire) -> None:
    await wire.initialize()
    for headers in (lh(wire), mh()):
        for body in ([modern_body()], [], [[]]):
            response = await wire.post(body, headers)
            assert_error(response, 400, -32600, request_id=None)
            assert isinstance(response.json(), dict)


@pytest.mark.parametrize(
    "host",
    [b"localhost.evil.com", b"127.0.0.1:80@evil.com", b"localhost.:8000", b"127.1", b"0x7f.0.0.1", b"[0:0:0:0:0:0:0:1]", b"::1", b"127.0.0.1:", b"127.0.0.1:+80", b"127.0.0.1,evil.com", b"", b"127.0.0.1:8000 "],
    ids=repr,
)
async def test_lookalike_hosts_are_421(app: Any, host: bytes) -> None:
    # 127.0.0.2 is no lookalike: the whole 127.0.0.0/8 is loopback (test_security.py admits it)
    status, body = await raw_asgi(app, "POST", post_headers(MODERN_LIST_HEADERS, host=host), MODERN_LIST)
    assert status == 421, body
    assert json.loads(body)["error"]["code"] == -32600


async def test_missing_host_is_421(app: Any) -> None:
    status, _ = await raw_asgi(app, "POST", post_headers(MODERN_LIST_HEADERS, host=None), MODERN_LIST)
    assert status == 421


@pytest.mark.parametrize("host", [b"LOCALHOST:8000", b"[::1]:8000", b"[::1]", b"127.0.0.1"], ids=repr)
async def test_loopback_host_spellings_are_allowed(app: Any, host: bytes) -> None:
    status, body = await raw_asgi(app, "POST", post_headers(MODERN_LIST_HEADERS, host=host), MODERN_LIST)
    assert status == 200, body


@pytest.mark.parametrize(
    "origin",
    ["http://localhost.evil.com", "http://127.0.0.1:80@evil.com", "http://localhost.:1", "null", "", "file://", "http://127.0.0.1:8000/", "http://localhost:1, http://evil.com"],
    ids=repr,
)
async def test_lookalike_origins_are_403(wire: Wire, origin: str) -> None:
    response = await wire.post(modern_body(), {**mh(), "origin": origin})
    assert_error(response, 403, -32600)


async def test_header_values_with_bytes_outside_ascii_are_typed_errors(app: Any) -> None:
    body = json.dumps(modern_body("tools/call", {"name": "é", "arguments": {}})).encode()
    for raw_name in ("é".encode("latin-1"), "é".encode()):
        headers = post_headers([(b"mcp-protocol-version", MODERN.encode()), (b"mcp-method", b"tools/call"), (b"mcp-name", raw_name)])
        status, out = await raw_asgi(app, "POST", headers, body)
        assert status == 400, out
        assert json.loads(out)["error"]["code"] == -32020
    headers = post_headers([(b"mcp-protocol-version", LEGACY.encode()), (b"mcp-session-id", "sé".encode())])
    status, out = await raw_asgi(app, "POST", headers, json.dumps(rpc("tools/list", None, 1)).encode())
    assert status == 404, out


def sentinel(raw: bytes) -> str:
    import base64

    return "=?base64?" + base64.b64encode(raw).decode() + "?="


@pytest.mark.parametrize(
    "header",
    ["=?base64?YWRk?=", "=?base64?YWRk", "=?base64?YW=Rk?=", "=?base64?YWRkAA?=", sentinel(b"\xff\xfe"), "=?base64?-_-_?=", sentinel(b"a" * 6000), "add\x7f"],
    ids=["valid-but-other", "unterminated", "inner-padding", "bad-padding", "non-utf8", "urlsafe-alphabet", "huge", "del-char"],
)
async def test_mcp_name_sentinels_that_do_not_decode_to_the_name_are_minus_32020(wire: Wire, header: str) -> None:
    body = modern_body("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
    if header == "=?base64?YWRk?=":  # decodes to "add": the one valid case, must be served
        response = await wire.post(body, mh("tools/call", header))
        assert tool_text(result_of(response)) == "2"
        return
    response = await wire.post(body, {**mh("tools/call"), "mcp-name": header})
    assert_error(response, 400, -32020, request_id=1)


async def test_duplicate_modern_standard_headers_are_minus_32020(wire: Wire) -> None:
    headers = httpx.Headers(
        [("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-protocol-version", MODERN), ("mcp-method", "tools/list"), ("mcp-method", "tools/list")]
    )
    response = await wire.client.post("/mcp", content=MODERN_LIST, headers=headers)
    assert_error(response, 400, -32020, request_id=1)


@pytest.mark.parametrize("sid", ["0" * 32, "a" * 8000, "", "DEADBEEF" * 4], ids=["unknown", "long", "empty", "upper"])
async def test_unknown_session_ids_are_404(wire: Wire, sid: str) -> None:
    response = await wire.post(rpc("tools/list", None, 1), {"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
    assert_error(response, 404, -32600)


async def test_missing_session_is_400(wire: Wire) -> None:
    for method in ("POST", "GET", "DELETE"):
        if method == "POST":
            response = await wire.post(rpc("tools/list", None, 1), {"mcp-protocol-version": LEGACY})
        else:
            response = await wire.client.request(method, "/mcp", headers={"accept": "text/event-stream"})
        assert_error(response, 400, -32600)


async def test_session_reuse_after_delete_is_404(wire: Wire) -> None:
    sid = await wire.initialize()
    deleted = await wire.client.delete("/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
    assert deleted.status_code == 200
    assert_error(await wire.legacy("tools/list", check=False), 404, -32600)
    again = await wire.client.delete("/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
    assert_error(again, 404, -32600)
    stream = await wire.client.get("/mcp", headers={"mcp-session-id": sid, "accept": "text/event-stream"})
    assert_error(stream, 404, -32600)


async def test_second_get_stream_is_409_and_delete_ends_the_first(app: Any) -> None:
    async with open_client(app) as client:
        sid = await Wire(client).initialize()
    headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
    async with asgi_exchange(app, "GET", headers=headers) as first:
        assert first.status == 200
        async with asgi_exchange(app, "GET", headers=headers) as second:
            await second.wait_for(lambda e: e.done.is_set())
            assert second.status == 409
            assert json.loads(second.body)["error"]["code"] == -32600
        async with open_client(app) as client:
            deleted = await client.delete("/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
            assert deleted.status_code == 200
        with anyio.fail_after(30):
            await first.finished.wait()


async def test_delete_during_in_flight_call_cancels_it(wire: Wire) -> None:
    sid = await wire.initialize()
    results: list[httpx.Response] = []

    async def call() -> None:
        params = {"name": "slow", "arguments": {"delay_ms": 1500}, "_meta": {"progressToken": "p"}}
        results.append(await wire.legacy("tools/call", params, request_id=5, check=False))

    with anyio.fail_after(1.5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.1)
            deleted = await wire.client.delete("/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": LEGACY})
            assert deleted.status_code == 200
    assert final_message(results[0])["error"]["code"] == -32800


async def test_cancel_from_another_session_does_not_cancel(app: Any) -> None:
    async with open_client(app) as client:
        owner, stranger = Wire(client), Wire(client)
        await owner.initialize()
        await stranger.initialize()
        results: list[httpx.Response] = []

        async def call() -> None:
            results.append(await owner.legacy("tools/call", {"name": "slow", "arguments": {"delay_ms": 200}}, request_id=5, check=False))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.05)
            for rid in (5, "5"):
                note = await stranger.post(rpc("notifications/cancelled", {"requestId": rid}, None), lh(stranger))
                assert note.status_code == 202
        assert tool_text(result_of(results[0])).startswith("done")


@pytest.mark.parametrize("rid", [None, True, 1.5, {"a": 1}, "x" * 10_000, 10**30], ids=["null", "bool", "float", "object", "long", "huge"])
async def test_cancel_with_odd_request_ids_is_202(wire: Wire, rid: Any) -> None:
    await wire.initialize()
    note = await wire.post(rpc("notifications/cancelled", {"requestId": rid, "reason": {"x": 1}}, None), lh(wire))
    assert note.status_code == 202
    assert (await wire.legacy("ping", check=False)).status_code == 200


async def test_client_disconnect_mid_call_leaves_the_session_serving(app: Any) -> None:
    async with open_client(app) as client:
        wire = Wire(client)
        sid = await wire.initialize()
        body = json.dumps(rpc("tools/call", {"name": "slow", "arguments": {"delay_ms": 1000}, "_meta": {"progressToken": 1}}, 9)).encode()
        headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
        async with asgi_exchange(app, "POST", headers=headers, body_chunks=[body]) as ex:
            await ex.wait_for(lambda e: b"notifications/progress" in e.body)
            ex.disconnect.set()
            assert (await wire.legacy("ping", check=False)).status_code == 200  # while the call runs on
            with anyio.fail_after(3.0):  # a 2025 disconnect is not a cancel: the call runs to its end
                await ex.finished.wait()
        assert b'"id":9' not in ex.body  # nothing after the disconnect
        assert (await wire.legacy("ping", check=False)).status_code == 200


async def test_client_responses_posted_are_202_legacy_and_400_modern(wire: Wire) -> None:
    await wire.initialize()
    for body in ({"jsonrpc": "2.0", "id": 1, "result": {}}, {"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}}):
        legacy = await wire.post(body, lh(wire))
        assert legacy.status_code == 202 and legacy.content == b""
        assert_error(await wire.post(body, mh()), 400, -32600)
        assert_error(await wire.post(body, {}), 400, -32600)  # no session
    assert_error(await wire.post({"jsonrpc": "2.0", "id": 1, "error": "boom"}, lh(wire)), 400, -32600)
    assert_error(await wire.post({"jsonrpc": "2.0", "id": True, "result": 1}, lh(wire)), 400, -32600)


async def test_removed_and_unknown_methods_modern_are_404(wire: Wire) -> None:
    for method in ("initialize", "ping", "logging/setLevel", "", "TOOLS/LIST", "rpc.discover"):
        response = await wire.modern(method, request_id=2, check=False)
        assert_error(response, 404, -32601, request_id=2)


async def test_same_ids_and_progress_tokens_in_two_sessions_do_not_cross(app: Any) -> None:
    async with open_client(app) as client:
        a, b = Wire(client), Wire(client)
        sa, sb = await a.initialize(), await b.initialize()
        out: dict[str, httpx.Response] = {}

        async def call(tag: str, wire: Wire) -> None:
            params = {"name": "slow", "arguments": {"delay_ms": 50}, "_meta": {"progressToken": "same"}}
            out[tag] = await wire.legacy("tools/call", params, request_id=1, check=False)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a", a)
            tg.start_soon(call, "b", b)
    assert tool_text(result_of(out["a"])) == f"done {sa}"
    assert tool_text(result_of(out["b"])) == f"done {sb}"
    for tag in ("a", "b"):
        assert len([m for m in messages_of(out[tag]) if m.get("method") == "notifications/progress"]) == 1


async def test_session_cap_is_a_typed_503_with_retry_after() -> None:
    app = build_app(max_sessions=2)
    async with open_client(app) as client:
        wire = Wire(client)
        await wire.initialize()
        await wire.initialize()
        body = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}, 0)
        response = await wire.post(body, {})
        assert response.status_code == 503
        assert response.headers.get("retry-after")
        assert "error" in response.json()
        assert "mcp-session-id" not in response.headers


async def test_unknown_tool_and_non_string_name_are_minus_32602(wire: Wire, era: str) -> None:
    for name in ("nope", "add\u0000", "a" * 10_000):
        response = await wire.call_tool(era, name, {}, check=False) if era == "legacy" or name.isprintable() else None
        if response is None:
            continue
        assert_error(response, 200 if era == "legacy" else 400, -32602)
        no_internals(response)


# -- Mcp-Param-* is single-valued: a second copy never slips past the mirror check --------


@pytest.mark.parametrize("values", [(b"eu", b"us"), (b"us", b"eu"), (b"eu", b"eu")], ids=["eu-us", "us-eu", "same"])
async def test_repeated_mcp_param_header_is_header_mismatch(app: Any, values: tuple[bytes, bytes]) -> None:
    body = json.dumps(modern_body("tools/call", {"name": "regional", "arguments": {"region": "eu"}}, 21)).encode()
    headers = post_headers(
        [
            (b"mcp-protocol-version", MODERN.encode()),
            (b"mcp-method", b"tools/call"),
            (b"mcp-name", b"regional"),
            (b"mcp-param-region", values[0]),
            (b"Mcp-Param-Region", values[1]),
        ]
    )
    status, raw = await raw_asgi(app, "POST", headers, body)
    assert status == 400
    message = json.loads(raw)
    assert message["error"]["code"] == -32020
    assert message["id"] == 21
    assert "mcp-param-region" in message["error"]["message"]
