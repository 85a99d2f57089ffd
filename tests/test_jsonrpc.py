"""JSON-RPC front door (both eras): batches, parse errors, params types, notifications, ids.

Known faults B17 (batch), B18 (invalid UTF-8 / parse), B19 (params not an object),
B20 (notifications and ids). Checklist §2.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    Wire,
    assert_error,
    final_message,
    make_app,
    make_router,
    modern_meta,
    result_of,
    rpc,
    tool_text,
)


def build_app() -> Any:
    router = make_router()

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @router.tool()
    async def echo(t: str) -> str:
        """Echo."""
        return t

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return build_app()


def legacy_h(wire: Wire) -> dict[str, str]:
    return {"mcp-session-id": wire.session or "", "mcp-protocol-version": LEGACY}


def modern_h(method: str = "tools/list") -> dict[str, str]:
    return {"mcp-protocol-version": MODERN, "mcp-method": method}


# -- B17: batches ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}],
        [],
        [1],
    ],
    ids=["two-requests", "empty", "scalar-item"],
)
async def test_b17_batch_is_rejected_legacy(wire: Wire, body: Any) -> None:
    await wire.initialize()
    response = await wire.post(body, legacy_h(wire))
    error = assert_error(response, 400, -32600, request_id=None)
    assert final_message(response)["id"] is None
    assert isinstance(response.json(), dict), "a batch must never be answered with an array"
    assert error["code"] == -32600


@pytest.mark.parametrize("body", [[rpc("tools/list", {"_meta": modern_meta()}, 1)], []], ids=["one", "empty"])
async def test_b17_batch_is_rejected_modern(wire: Wire, body: Any) -> None:
    response = await wire.post(body, modern_h())
    assert_error(response, 400, -32600, request_id=None)
    assert isinstance(response.json(), dict)


async def test_b17_batch_without_session_or_headers_is_rejected(wire: Wire) -> None:
    response = await wire.post([rpc("tools/list", None, 1)])
    assert_error(response, 400, -32600, request_id=None)


# -- B18: parse errors -------------------------------------------------------------------

INVALID_UTF8 = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"t":"a \x97 b"}}}'
)


async def test_b18_invalid_utf8_is_400_parse_error(wire: Wire) -> None:
    await wire.initialize()
    response = await wire.post(None, legacy_h(wire), content=INVALID_UTF8)
    assert_error(response, 400, -32700, request_id=None)


async def test_b18_invalid_utf8_modern_is_400_parse_error(wire: Wire) -> None:
    response = await wire.post(None, {**modern_h("tools/call"), "mcp-name": "echo"}, content=INVALID_UTF8)
    assert_error(response, 400, -32700, request_id=None)


async def test_b18_invalid_utf8_without_session_is_400_parse_error(wire: Wire) -> None:
    response = await wire.post(None, content=INVALID_UTF8)
    assert_error(response, 400, -32700, request_id=None)


async def test_b18_truncated_json_is_400_parse_error(wire: Wire) -> None:
    await wire.initialize()
    response = await wire.post(None, legacy_h(wire), content=b'{"jsonrpc":"2.0","id":1,')
    assert_error(response, 400, -32700, request_id=None)


async def test_b18_unknown_method_legacy_is_method_not_found(wire: Wire) -> None:
    await wire.initialize()
    response = await wire.legacy("nope/nope", request_id=1)
    error = assert_error(response, 200, -32601, request_id=1)
    assert error["code"] == -32601


async def test_b18_unknown_method_modern_is_404(wire: Wire) -> None:
    response = await wire.modern("nope/nope", request_id=1)
    assert_error(response, 404, -32601, request_id=1)


@pytest.mark.parametrize(
    "body",
    [b'{"id":1,"method":"tools/list"}', b"123", b'"text"', b"null", b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}'],
    ids=["no-jsonrpc", "number", "string", "null", "wrong-jsonrpc"],
)
async def test_b18_json_that_is_not_a_request_is_invalid_request(wire: Wire, body: bytes) -> None:
    await wire.initialize()
    response = await wire.post(None, legacy_h(wire), content=body)
    assert_error(response, 400, -32600)


async def test_b18_invalid_request_echoes_readable_id(wire: Wire) -> None:
    await wire.initialize()
    response = await wire.post(None, legacy_h(wire), content=b'{"id":7,"method":"tools/list"}')
    assert_error(response, 400, -32600, request_id=7)


# -- B19: params not an object -----------------------------------------------------------


@pytest.mark.parametrize("params", ["a-string", [1, 2, 3], 42, True], ids=["string", "array", "number", "bool"])
async def test_b19_params_not_object_legacy(wire: Wire, params: Any) -> None:
    await wire.initialize()
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}
    response = await wire.post(body, legacy_h(wire))
    assert response.content, "never an empty body"
    assert_error(response, 400, -32600, request_id=5)


@pytest.mark.parametrize("params", ["a-string", [1, 2, 3], 42], ids=["string", "array", "number"])
async def test_b19_params_not_object_modern(wire: Wire, params: Any) -> None:
    body = {"jsonrpc": "2.0", "id": "p-1", "method": "tools/list", "params": params}
    response = await wire.post(body, modern_h())
    assert_error(response, 400, -32600, request_id="p-1")


async def test_b19_params_null_counts_as_absent(wire: Wire) -> None:
    await wire.initialize()
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": None}
    response = await wire.post(body, legacy_h(wire))
    assert response.status_code == 200
    assert "tools" in result_of(response)


@pytest.mark.parametrize("arguments", ["x", [1]], ids=["string", "array"])
async def test_b19_arguments_not_object_is_invalid_params(wire: Wire, arguments: Any) -> None:
    await wire.initialize()
    response = await wire.legacy("tools/call", {"name": "echo", "arguments": arguments}, request_id=3)
    assert_error(response, 200, -32602, request_id=3)
    response = await wire.modern("tools/call", {"name": "echo", "arguments": arguments}, request_id=4)
    assert_error(response, 400, -32602, request_id=4)


# -- B20: notifications and ids ------------------------------------------------------------


async def test_b20_notification_is_202_without_body_legacy(wire: Wire) -> None:
    await wire.initialize()
    response = await wire.post({"jsonrpc": "2.0", "method": "tools/list"}, legacy_h(wire))
    assert response.status_code == 202
    assert response.content == b""


async def test_b20_notification_is_202_without_body_modern(wire: Wire) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "_meta": modern_meta()}}
    response = await wire.post(body, {"mcp-protocol-version": MODERN, "mcp-method": "notifications/cancelled"})
    assert response.status_code == 202
    assert response.content == b""


async def test_b20_notification_without_session_is_never_answered_with_a_result(wire: Wire) -> None:
    response = await wire.post({"jsonrpc": "2.0", "method": "tools/list"})
    assert response.status_code in (202, 400)
    if response.content:
        assert "result" not in response.json()


async def test_b20_null_id_is_invalid_request(wire: Wire) -> None:
    await wire.initialize()
    response = await wire.post({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, legacy_h(wire))
    assert_error(response, 400, -32600, request_id=None)


@pytest.mark.parametrize("bad_id", [1.5, True, {"a": 1}, [1]], ids=["float", "bool", "object", "array"])
async def test_b20_non_integer_id_is_invalid_request(wire: Wire, bad_id: Any) -> None:
    await wire.initialize()
    response = await wire.post({"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"}, legacy_h(wire))
    assert_error(response, 400, -32600)
    assert "result" not in final_message(response)


@pytest.mark.parametrize("request_id", [0, "0", "", 7, "7", -1, 2**53 + 1, "s-7"], ids=repr)
async def test_b20_ids_kept_as_sent_legacy(wire: Wire, request_id: Any) -> None:
    await wire.initialize()
    response = await wire.legacy("tools/list", request_id=request_id)
    assert response.status_code == 200
    message = final_message(response)
    assert message["id"] == request_id
    assert type(message["id"]) is type(request_id)
    assert "result" in message


@pytest.mark.parametrize("request_id", [0, "0", "", 7, "7"], ids=repr)
async def test_b20_ids_kept_as_sent_modern(wire: Wire, request_id: Any) -> None:
    response = await wire.modern("tools/list", request_id=request_id)
    assert response.status_code == 200
    message = final_message(response)
    assert message["id"] == request_id
    assert type(message["id"]) is type(request_id)


async def test_b20_ids_seven_and_string_seven_are_distinct_on_tools_call(wire: Wire) -> None:
    await wire.initialize()
    seen = []
    for rid in (0, 7, "7"):
        response = await wire.legacy("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}, request_id=rid)
        message = final_message(response)
        seen.append(message["id"])
        assert tool_text(message["result"]) == "2"
    assert [type(s) for s in seen] == [int, int, str]
    assert seen == [0, 7, "7"]
    # On the raw bytes the string id stays quoted and the integers do not.
    raw = (await wire.legacy("tools/list", request_id="7")).content
    assert b'"id":"7"' in raw.replace(b" ", b"")


async def test_error_responses_are_json_objects_with_jsonrpc(wire: Wire) -> None:
    response = await wire.post(None, content=b"{")
    assert response.headers["content-type"].startswith("application/json")
    body = json.loads(response.content)
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == -32700
    assert response.request.headers["accept"] == ACCEPT_BOTH


def test_response_with_both_result_and_error_is_invalid() -> None:
    from fastapi_mcp_ctx._wire.jsonrpc import parse_message
    from fastapi_mcp_ctx.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError):
        parse_message(b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}')


def test_parse_error_messages_name_the_fault() -> None:
    from fastapi_mcp_ctx._wire.jsonrpc import parse_message
    from fastapi_mcp_ctx.errors import ParseError

    with pytest.raises(ParseError, match="UTF-8"):
        parse_message(b'{"jsonrpc":"2.0","id":1,"method":"\xff"}')
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_message(b"[" * 100_000)
