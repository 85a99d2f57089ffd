"""Front-door faults a new user and a soak run found, in process (the real-server half is
``test_uvicorn.py``).

- (c) behind a reverse proxy every call was 421 and nothing named ``MCP_ALLOWED_HOSTS``; an
  unknown ``MCP-Protocol-Version`` on a 2025 session was judged as a 2026 request missing its
  envelope (known faults B21, B29; DESIGN.md decision 2).
- (d) a body shorter than its ``Content-Length`` held the connection forever (RESOURCE-LIMITS).
- (e) ``1e400`` reached a ``float`` parameter as ``inf`` (B35: a value error in arguments is an
  ``isError`` result; B18: ``Infinity``/``NaN`` are parse errors).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from conftest import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    Wire,
    asgi_exchange,
    assert_error,
    final_message,
    make_app,
    make_router,
    open_client,
    result_of,
    rpc,
    tool_text,
)
from fastapi import Depends
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel
from test_adversarial import raw_asgi

from fastapi_mcp_ctx import McpSettings
from fastapi_mcp_ctx.errors import RequestTimeoutError

CALLS: list[Any] = []


class Point(BaseModel):
    lat: float
    lon: float = 0.0


def build_app(**settings: Any) -> Any:
    router = make_router(**settings)

    @router.tool()
    async def scale(x: float, factor: float = 2.0) -> float:
        """A float parameter: inf or nan must never arrive."""
        CALLS.append(x)
        return x * factor

    @router.tool()
    async def total(values: list[float], extra: dict[str, Any] | None = None) -> float:
        """Floats nested in a list, anything in a dict."""
        CALLS.append((values, extra))
        return sum(values)

    @router.tool()
    async def place(point: Point, big: int = 0) -> str:
        """A user model with its own (default) config: inf must not slip in through it."""
        CALLS.append(point)
        return f"{point.lat},{point.lon}"

    @router.tool()
    async def ping_tool() -> str:
        """Answer pong."""
        return "pong"

    return make_app(router)


@pytest.fixture
def app() -> Any:
    CALLS.clear()
    return build_app()


def modern_headers(method: str = "tools/call", name: str | None = "scale") -> dict[str, str]:
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


META = (
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
)


async def raw_call(wire: Wire, era: str, arguments: bytes, name: str = "scale", request_id: int = 9) -> Any:
    if era == "legacy":
        await wire.initialize()
        headers = wire.legacy_headers()
        params = b'{"name":"' + name.encode() + b'","arguments":' + arguments + b"}"
    else:
        headers = modern_headers(name=name)
        params = b'{"name":"' + name.encode() + b'","arguments":' + arguments + b"," + META + b"}"
    body = b'{"jsonrpc":"2.0","id":' + str(request_id).encode() + b',"method":"tools/call","params":' + params + b"}"
    return await wire.post(None, headers, content=body)


# -- (e) non-finite numbers never reach a handler ---------------------------------------------------


@pytest.mark.parametrize(
    "arguments,path",
    [
        (b'{"x":1e400}', "x"),
        (b'{"x":-1e400}', "x"),
        (b'{"x":1.5E+309}', "x"),
        (b'{"x":1' + b"0" * 400 + b"}", "x"),
        (b'{"x":2,"factor":1e999}', "factor"),
    ],
    ids=["1e400", "-1e400", "1.5E+309", "400-digits", "second-argument"],
)
async def test_b35_overflowing_number_is_an_argument_error_never_inf(wire: Wire, era: str, arguments: bytes, path: str) -> None:
    response = await raw_call(wire, era, arguments)
    message = final_message(response)
    assert "error" not in message, f"a value error in arguments is a tool execution error: {message}"
    result = message["result"]
    assert result["isError"] is True
    assert f"{path}: number out of range" in tool_text(result)
    error = result["_meta"]["fastapi-mcp-ctx/error"]
    assert error["code"] == -32602 and error["data"]["reason"] == "invalid_arguments" and error["data"]["requestId"] == 9
    assert CALLS == [], "the tool must not run with inf"


@pytest.mark.parametrize(
    "arguments,path",
    [(b'{"values":[1,1e400]}', "values.1"), (b'{"values":[],"extra":{"deep":[{"v":-1e500}]}}', "extra.deep.0.v")],
    ids=["list", "any-dict"],
)
async def test_overflow_nested_in_arguments_names_the_path(wire: Wire, era: str, arguments: bytes, path: str) -> None:
    result = result_of(await raw_call(wire, era, arguments, name="total"))
    assert result["isError"] is True and f"{path}: number out of range" in tool_text(result)
    assert CALLS == []


@pytest.mark.parametrize(
    "arguments,path",
    [
        (b'{"point":{"lat":1' + b"0" * 400 + b"}}", "point.lat"),
        (b'{"point":{"lat":1e400}}', "point.lat"),
    ],
    ids=["huge-integer-into-float", "1e400"],
)
async def test_overflow_into_a_user_models_float_field(wire: Wire, era: str, arguments: bytes, path: str) -> None:
    result = result_of(await raw_call(wire, era, arguments, name="place"))
    assert result["isError"] is True and f"{path}: number out of range" in tool_text(result)
    assert CALLS == []


async def test_huge_integers_still_reach_int_parameters(wire: Wire, era: str) -> None:
    big = b"9" * 400
    result = result_of(await raw_call(wire, era, b'{"point":{"lat":1.5},"big":' + big + b"}", name="place"))
    assert result["isError"] is False and result["structuredContent"] == {"result": "1.5,0.0"}


@pytest.mark.parametrize(
    "arguments",
    [b'{"x":Infinity}', b'{"x":-Infinity}', b'{"x":NaN}', b'{"x":nan}', b'{"x":inf}'],
    ids=["Infinity", "-Infinity", "NaN", "nan", "inf"],
)
async def test_b18_non_json_number_literals_are_parse_errors(wire: Wire, era: str, arguments: bytes) -> None:
    """RFC 8259 §6: Infinity and NaN are not permitted in JSON text: -32700, id unreadable."""
    response = await raw_call(wire, era, arguments)
    assert_error(response, 400, -32700, request_id=None)
    assert CALLS == []


async def test_largest_finite_doubles_still_work(wire: Wire, era: str) -> None:
    result = result_of(await raw_call(wire, era, b'{"x":1.7976931348623157e308,"factor":1}'))
    assert result["isError"] is False and result["structuredContent"] == {"result": 1.7976931348623157e308}
    tiny = result_of(await raw_call(wire, era, b'{"x":1e-400,"factor":1}', request_id=10))
    assert tiny["structuredContent"] == {"result": 0.0}  # underflow rounds to zero: finite, accepted


async def test_overflow_in_params_outside_arguments_is_invalid_params(wire: Wire) -> None:
    await wire.initialize()
    body = b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":1e400}}'
    error = assert_error(await wire.post(None, wire.legacy_headers(), content=body), 400, -32602, request_id=5)
    assert error["data"]["reason"] == "number_out_of_range" and error["data"]["path"] == "params.cursor"
    body = b'{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{' + META[:-1] + b',"progressToken":1e400}}}'
    error = assert_error(await wire.post(None, modern_headers("tools/list", None), content=body), 400, -32602, request_id=6)
    assert error["data"]["path"] == "params._meta.progressToken"


async def test_overflow_in_a_notification_is_refused(wire: Wire) -> None:
    await wire.initialize()
    body = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":1e400}}'
    response = await wire.post(None, wire.legacy_headers(), content=body)
    assert_error(response, 400, -32602, request_id=None)


async def test_overflow_in_an_unknown_member_is_invalid_request(wire: Wire) -> None:
    await wire.initialize()
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/list","x":1e400}'
    error = assert_error(await wire.post(None, wire.legacy_headers(), content=body), 400, -32600, request_id=7)
    assert error["data"]["path"] == "x"


async def test_exponents_inside_strings_do_not_trip_the_check(wire: Wire, era: str) -> None:
    text = "1e400 " + "9" * 300
    response = await wire.call_tool(era, "total", {"values": [1.5], "extra": {"note": text}})
    assert result_of(response)["structuredContent"] == {"result": 1.5}


# -- (c) an unknown MCP-Protocol-Version: 2025 with a session, -32022 without --------------------------


@pytest.mark.parametrize("version", ["1900-01-01", "not-a-version", "2099-13-45", "2026-07-29"])
async def test_b21_unknown_version_on_a_session_is_a_2025_400_listing_supported(wire: Wire, version: str) -> None:
    await wire.initialize()
    response = await wire.legacy("tools/list", version=version, request_id=21, check=False)
    error = assert_error(response, 400, -32600, request_id=21)
    assert error["data"]["supported"] == list(HANDSHAKE_PROTOCOL_VERSIONS)
    assert error["data"]["requested"] == version
    assert error["data"]["reason"] == "unsupported_version"
    for supported in HANDSHAKE_PROTOCOL_VERSIONS:
        assert supported in error["message"]
    assert "_meta" not in error["message"], "a 2025 request must not be judged by 2026 envelope rules"


async def test_b21_unknown_version_on_a_session_for_every_message_kind(wire: Wire) -> None:
    sid = await wire.initialize()
    headers = {"mcp-session-id": sid, "mcp-protocol-version": "1900-01-01"}
    note = await wire.post(rpc("notifications/initialized", {}, None), headers)
    assert_error(note, 400, -32600, request_id=None)
    get = await wire.client.get("/mcp", headers={**headers, "accept": "text/event-stream"})
    assert get.status_code == 400 and get.json()["error"]["data"]["supported"] == list(HANDSHAKE_PROTOCOL_VERSIONS)
    delete = await wire.client.delete("/mcp", headers=headers)
    assert delete.status_code == 400
    assert (await wire.legacy("tools/list")).status_code == 200, "the session survives a bad header"


async def test_known_modern_version_with_a_session_is_still_modern(wire: Wire) -> None:
    """2026 ignores Mcp-Session-Id (S-2026-HTTP Backward Compatibility)."""
    sid = await wire.initialize()
    response = await wire.modern("tools/list", headers={"mcp-session-id": sid}, request_id=3)
    assert result_of(response)["resultType"] == "complete"
    get = await wire.client.get("/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": MODERN, "accept": "text/event-stream"})
    assert get.status_code == 405


@pytest.mark.parametrize("version", ["1900-01-01", "not-a-version", "2026-07-29"])
async def test_unknown_version_without_session_or_envelope_is_unsupported_version(wire: Wire, version: str) -> None:
    response = await wire.post(rpc("tools/list", None, 22), {"mcp-protocol-version": version, "mcp-method": "tools/list"})
    error = assert_error(response, 400, -32022, request_id=22)
    assert error["data"]["supported"] == list(MODERN_PROTOCOL_VERSIONS)
    assert error["data"]["requested"] == version
    assert "mcp-session-id" not in response.headers


async def test_unknown_version_with_envelope_keeps_the_ladder(wire: Wire) -> None:
    """A well-formed envelope is still judged header rung first (checklist §4.5: -32020 before -32022)."""
    response = await wire.modern("tools/list", headers={"mcp-protocol-version": "2099-01-01"}, request_id=23)
    assert_error(response, 400, -32020, request_id=23)


# -- (c) Host / Origin refusals say what to set ------------------------------------------------------


async def test_b29_421_names_mcp_allowed_hosts(client: Any, caplog: pytest.LogCaptureFixture) -> None:
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "host": "proxy-421.example.test"}
    with caplog.at_level(logging.WARNING, logger="fastapi_mcp_ctx"):
        for _ in range(3):
            response = await client.post("/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers=headers)
    assert response.status_code == 421
    error = response.json()["error"]
    assert "MCP_ALLOWED_HOSTS" in error["message"]
    assert error["data"]["reason"] == "host_not_allowed"
    assert "MCP_ALLOWED_HOSTS" in error["data"]["recovery"]["hint"]
    reports = [r for r in caplog.records if "MCP_ALLOWED_HOSTS" in r.getMessage() and "proxy-421.example.test" in r.getMessage()]
    assert len(reports) == 1, "the server log names the setting once per host, not once per request"


async def test_b29_403_names_mcp_allowed_origins(client: Any) -> None:
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "origin": "https://evil.example.test"}
    response = await client.post("/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers=headers)
    assert response.status_code == 403
    error = response.json()["error"]
    assert "MCP_ALLOWED_ORIGINS" in error["message"] and "MCP_ALLOWED_ORIGINS" in error["data"]["recovery"]["hint"]
    assert error["data"]["reason"] == "origin_not_allowed"


async def test_reverse_proxy_setup_from_the_guide() -> None:
    """docs/guide.md: a proxy on the same machine forwards Host mcp.example.com to 127.0.0.1:8000."""
    app = build_app(allowed_hosts=["mcp.example.com"], allowed_origins=["https://mcp.example.com"])
    async with open_client(app) as client:
        wire = Wire(client)
        headers = {"host": "mcp.example.com", "origin": "https://mcp.example.com", "x-forwarded-for": "203.0.113.9"}
        assert (await wire.call_tool("modern", "ping_tool", headers=headers)).status_code == 200
        await wire.initialize(headers=headers)
        assert (await wire.legacy("tools/list", headers=headers)).status_code == 200
        evil = await wire.legacy("tools/list", headers={**headers, "host": "evil.example.test"}, check=False)
        assert evil.status_code == 421


# -- (d) the body read is bounded in time (the real-socket half is in test_uvicorn.py) ----------------


@pytest.mark.parametrize("framing", [(b"content-length", b"500"), (b"transfer-encoding", b"chunked")], ids=["short-content-length", "endless-chunks"])
@pytest.mark.parametrize("guarded", [False, True], ids=["lean", "router-dependencies"])
async def test_stalled_body_is_408(framing: tuple[bytes, bytes], guarded: bool) -> None:
    router = make_router(body_timeout_seconds=0.3)
    app = make_app()
    app.include_router(router, dependencies=[Depends(lambda: None)] if guarded else [])
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"accept", ACCEPT_BOTH.encode()), framing]
    started = anyio.current_time()
    status, body = await raw_asgi(app, "POST", headers, b'{"jsonrpc":"2.0","id":1,', more_body_after=True, timeout=30.0)
    assert 0.25 < anyio.current_time() - started < 20  # the 0.3 s bound, not a hang (margins for a loaded machine)
    assert status == 408
    error = json.loads(body)["error"]
    assert error["code"] == -32600 and error["data"]["reason"] == "body_timeout"
    assert "MCP_BODY_TIMEOUT_SECONDS" in error["message"]


def test_body_timeout_error_closes_the_connection() -> None:
    assert RequestTimeoutError().headers == {"Connection": "close"}  # uvicorn closes after the response
    assert RequestTimeoutError.http_status == 408


async def test_body_timeout_default_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert McpSettings().body_timeout_seconds == 10.0
    monkeypatch.setenv("MCP_BODY_TIMEOUT_SECONDS", "2.5")
    assert McpSettings().body_timeout_seconds == 2.5
    monkeypatch.setenv("MCP_BODY_TIMEOUT_SECONDS", "0")
    with pytest.raises(ValueError):
        McpSettings()


async def test_a_body_in_many_chunks_within_the_limit_is_served() -> None:
    app = build_app(body_timeout_seconds=60.0)  # the chunks come at once: far within it
    body = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}, 1)
    data = json.dumps(body).encode()
    chunks = [data[i : i + 16] for i in range(0, len(data), 16)]
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH}
    async with asgi_exchange(app, "POST", headers=headers, body_chunks=chunks) as exchange:
        await exchange.wait_for(lambda e: e.done.is_set())
    assert exchange.status == 200 and json.loads(exchange.body)["result"]["protocolVersion"] == LEGACY


@pytest.mark.parametrize("value", ["\n", "add\n", "a\nb", "\r\n"])
def test_a_header_value_with_a_line_break_is_always_encoded(value: str) -> None:
    """``$`` matches before a final newline: every ``^...$`` pattern of the package ends in ``\\Z``
    so a trailing line break never passes a check meant for printable text."""
    from fastapi_mcp_ctx._wire.envelope import decode_header_value, encode_header_value

    encoded = encode_header_value(value)
    assert encoded.startswith("=?base64?") and "\n" not in encoded and decode_header_value(encoded) == value


def test_no_anchored_pattern_of_the_package_ends_in_a_dollar() -> None:
    import pathlib
    import re as _re

    package = pathlib.Path(__file__).resolve().parents[1] / "fastapi_mcp_ctx"
    offenders = [
        f"{path.name}:{n}"
        for path in package.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _re.search(r're\.compile\(rf?"\^.*\$"', line)
    ]
    assert not offenders, f"use \\Z, not $, at the end of an anchored pattern: {offenders}"


_GOOD_INIT: dict[str, Any] = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}


@pytest.mark.parametrize(
    "params",
    [
        {**_GOOD_INIT, "protocolVersion": 20251125},
        {k: v for k, v in _GOOD_INIT.items() if k != "protocolVersion"},
        {**_GOOD_INIT, "capabilities": "str"},
        {**_GOOD_INIT, "capabilities": []},
        {**_GOOD_INIT, "capabilities": None},
        {k: v for k, v in _GOOD_INIT.items() if k != "clientInfo"},
        {**_GOOD_INIT, "clientInfo": {"version": "1"}},
        {**_GOOD_INIT, "clientInfo": {"name": "c", "version": 1}},
    ],
)
async def test_an_initialize_with_members_of_the_wrong_type_is_invalid_params_and_makes_no_session(params: dict[str, Any]) -> None:
    async with open_client(make_app(make_router())) as client:
        response = await client.post("/mcp", json=rpc("initialize", params, 0), headers={"accept": ACCEPT_BOTH})
    assert response.status_code == 400 and "mcp-session-id" not in response.headers, response.text
    assert response.json()["error"]["code"] == -32602
