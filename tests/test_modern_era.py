"""2026-07-28 stateless era: server/discover, the _meta envelope, header rules, removed methods.

Known faults B22 (missing version header), B23 (era classification), B25 (_meta validation),
B28 (base64 sentinel Mcp-Name) and the header cross-checks. Checklist §4.2-4.5, Appendix A.1.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

import pytest
from conftest import (
    META_CAPABILITIES,
    META_LOG_LEVEL,
    META_VERSION,
    MODERN,
    SERVER_INFO,
    Wire,
    assert_error,
    check_result,
    final_message,
    make_app,
    make_router,
    modern_meta,
    result_of,
    rpc,
    tool_text,
)
from pydantic import Field


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def build_app() -> Any:
    router = make_router(instructions="Use the tools.", cache_ttl_ms=1500, cache_scope="public")

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @router.tool()
    async def echo(t: str) -> str:
        """Echo."""
        return t

    @router.tool(name="a.b-c/d_e")
    async def punctuated() -> str:
        """A name with every allowed punctuation mark."""
        return "ok"

    @router.tool()
    async def region_tool(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """A tool with an x-mcp-header argument."""
        return region

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return build_app()


# -- server/discover -----------------------------------------------------------------------


async def test_server_discover_shape(wire: Wire) -> None:
    response = await wire.modern("server/discover", request_id=1)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    result = result_of(response)
    check_result("server/discover", MODERN, result)
    assert result["resultType"] == "complete"
    assert MODERN in result["supportedVersions"]
    assert "tools" in result["capabilities"]
    assert result["ttlMs"] == 1500
    assert result["cacheScope"] == "public"
    assert result["instructions"] == "Use the tools."
    assert result["_meta"][SERVER_INFO] == {"name": "test-server", "version": "1.2.3"}
    assert "serverInfo" not in result
    assert "mcp-session-id" not in response.headers


async def test_server_discover_without_client_info_succeeds(wire: Wire) -> None:
    params = {"_meta": modern_meta(client_info=None)}
    response = await wire.post(rpc("server/discover", params, 2), {"mcp-protocol-version": MODERN, "mcp-method": "server/discover"})
    assert response.status_code == 200
    check_result("server/discover", MODERN, result_of(response))


async def test_tools_list_modern_shape(wire: Wire) -> None:
    response = await wire.modern("tools/list", request_id=2)
    result = result_of(response)
    check_result("tools/list", MODERN, result)
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == 1500 and result["cacheScope"] == "public"
    assert result["_meta"][SERVER_INFO]["name"] == "test-server"
    names = [t["name"] for t in result["tools"]]
    assert names == ["add", "echo", "a.b-c/d_e", "region_tool"]
    for tool in result["tools"]:
        assert tool["inputSchema"]["type"] == "object"


async def test_tools_call_modern_shape(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "add", "arguments": {"a": 20, "b": 22}}, request_id=3)
    assert response.status_code == 200
    result = result_of(response)
    check_result("tools/call", MODERN, result)
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"result": 42}
    assert tool_text(result) == "42"
    assert result["_meta"][SERVER_INFO]["version"] == "1.2.3"
    assert "ttlMs" not in result


async def test_tool_error_result_carries_result_type(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "add", "arguments": {"a": "x", "b": 1}})
    result = result_of(response)
    assert result["isError"] is True
    assert result["resultType"] == "complete"


async def test_responses_never_mint_a_session(wire: Wire) -> None:
    for method, params in (("server/discover", None), ("tools/list", None), ("tools/call", {"name": "echo", "arguments": {"t": "x"}})):
        response = await wire.modern(method, params)
        assert response.status_code == 200
        assert "mcp-session-id" not in response.headers


# -- B25: the _meta envelope ---------------------------------------------------------------------


async def test_b25_missing_meta_is_400_invalid_params(wire: Wire) -> None:
    body = rpc("tools/list", {}, 11)
    response = await wire.post(body, {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    assert_error(response, 400, -32602, request_id=11)
    assert "mcp-session-id" not in response.headers


async def test_b25_missing_params_is_400_invalid_params(wire: Wire) -> None:
    response = await wire.post(rpc("tools/list", None, "x1"), {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    assert_error(response, 400, -32602, request_id="x1")


@pytest.mark.parametrize("meta", ["string", [1], 5], ids=["string", "array", "number"])
async def test_b25_meta_not_object_is_400_invalid_params(wire: Wire, meta: Any) -> None:
    response = await wire.post(rpc("tools/list", {"_meta": meta}, 12), {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    assert_error(response, 400, -32602, request_id=12)


async def test_b25_missing_protocol_version_is_400_invalid_params(wire: Wire) -> None:
    meta = modern_meta()
    del meta[META_VERSION]
    response = await wire.post(rpc("tools/list", {"_meta": meta}, 13), {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    assert_error(response, 400, -32602, request_id=13)
    assert "mcp-session-id" not in response.headers


async def test_b25_missing_client_capabilities_is_400_invalid_params(wire: Wire) -> None:
    meta = modern_meta()
    del meta[META_CAPABILITIES]
    response = await wire.post(rpc("tools/list", {"_meta": meta}, 14), {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    assert_error(response, 400, -32602, request_id=14)
    assert "mcp-session-id" not in response.headers


@pytest.mark.parametrize("version", [20260728, ""], ids=["number", "empty"])
async def test_b25_malformed_protocol_version_is_400(wire: Wire, version: Any) -> None:
    response = await wire.post(
        rpc("tools/list", {"_meta": modern_meta(version=version)}, 15), {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    )
    error = error_of_400(response)
    assert error["code"] in (-32602, -32020)
    assert final_message(response)["id"] == 15


def error_of_400(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    message = final_message(response)
    assert "error" in message
    return message["error"]


async def test_b25_capabilities_not_object_is_400_invalid_params(wire: Wire) -> None:
    response = await wire.modern("tools/list", meta={META_CAPABILITIES: "all"}, request_id=16)
    assert_error(response, 400, -32602, request_id=16)


async def test_b25_missing_client_info_is_allowed(wire: Wire) -> None:
    params = {"_meta": modern_meta(client_info=None)}
    response = await wire.post(rpc("tools/list", params, 17), {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    assert response.status_code == 200
    check_result("tools/list", MODERN, result_of(response))


async def test_b25_legacy_tools_list_without_meta_still_works(wire: Wire) -> None:
    await wire.initialize()
    response = await wire.legacy("tools/list")
    assert response.status_code == 200
    assert "resultType" not in result_of(response)


async def test_invalid_log_level_is_400_invalid_params(wire: Wire) -> None:
    response = await wire.modern("tools/list", meta={META_LOG_LEVEL: "verbose"}, request_id=18)
    assert_error(response, 400, -32602, request_id=18)


# -- versions: header vs _meta -------------------------------------------------------------------


async def test_header_meta_version_mismatch_is_400_header_mismatch(wire: Wire) -> None:
    response = await wire.modern("tools/list", headers={"mcp-protocol-version": "2099-01-01"}, request_id=21)
    assert_error(response, 400, -32020, request_id=21)


async def test_header_supported_meta_unsupported_is_header_mismatch(wire: Wire) -> None:
    response = await wire.modern("tools/list", meta={META_VERSION: "2099-01-01"}, request_id=22)
    assert_error(response, 400, -32020, request_id=22)


@pytest.mark.parametrize("version", ["1999-01-01", "2099-01-01", "v999"])
async def test_both_unsupported_is_400_unsupported_version(wire: Wire, version: str) -> None:
    response = await wire.modern("tools/list", meta={META_VERSION: version}, headers={"mcp-protocol-version": version}, request_id=23)
    error = assert_error(response, 400, -32022, request_id=23)
    assert error["data"]["requested"] == version
    assert MODERN in error["data"]["supported"]
    discover = result_of(await wire.modern("server/discover"))
    assert set(error["data"]["supported"]) <= set(discover["supportedVersions"])


async def test_b22_missing_version_header_is_400_header_mismatch(wire: Wire) -> None:
    params = {"name": "echo", "arguments": {"t": "hi"}, "_meta": modern_meta()}
    response = await wire.post(rpc("tools/call", params, 1), {"mcp-method": "tools/call", "mcp-name": "echo"})
    assert_error(response, 400, -32020, request_id=1)
    assert "mcp-session-id" not in response.headers


async def test_b22_missing_version_header_never_runs_the_tool() -> None:
    calls: list[str] = []
    router = make_router()

    @router.tool()
    async def record(t: str) -> str:
        """Record a call."""
        calls.append(t)
        return t

    from conftest import open_client

    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        params = {"name": "record", "arguments": {"t": "hi"}, "_meta": modern_meta()}
        response = await wire.post(rpc("tools/call", params, 1), {"mcp-method": "tools/call", "mcp-name": "record"})
        assert response.status_code == 400
    assert calls == []


async def test_b22_method_header_mismatch_is_header_mismatch(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": "x"}}, headers={"mcp-method": "tools/list"}, request_id=2)
    assert_error(response, 400, -32020, request_id=2)


async def test_b22_missing_method_header_is_header_mismatch(wire: Wire) -> None:
    response = await wire.modern("tools/list", headers={"mcp-method": None}, request_id=3)
    assert_error(response, 400, -32020, request_id=3)


async def test_b22_name_header_mismatch_is_header_mismatch(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": "x"}}, headers={"mcp-name": "other"}, request_id=4)
    assert_error(response, 400, -32020, request_id=4)


async def test_b22_missing_name_header_is_header_mismatch(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": "x"}}, headers={"mcp-name": None}, request_id=5)
    assert_error(response, 400, -32020, request_id=5)


async def test_method_header_is_case_sensitive(wire: Wire) -> None:
    response = await wire.modern("tools/list", headers={"mcp-method": "TOOLS/LIST"}, request_id=6)
    assert_error(response, 400, -32020, request_id=6)


async def test_header_names_are_case_insensitive(wire: Wire) -> None:
    params = {"name": "echo", "arguments": {"t": "hi"}, "_meta": modern_meta()}
    headers = {"MCP-PROTOCOL-VERSION": MODERN, "mcp-method": "tools/call", "Mcp-Name": "echo"}
    response = await wire.post(rpc("tools/call", params, 7), headers)
    assert response.status_code == 200
    assert tool_text(result_of(response)) == "hi"


async def test_header_values_are_trimmed(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": "y"}}, headers={"mcp-name": "  echo ", "mcp-method": " tools/call"})
    assert response.status_code == 200


async def test_missing_version_header_with_meta_and_no_session_is_header_mismatch(wire: Wire) -> None:
    response = await wire.post(rpc("tools/list", {"_meta": modern_meta()}, 8), {"mcp-method": "tools/list"})
    assert_error(response, 400, -32020, request_id=8)


# -- B28: base64 sentinel Mcp-Name ---------------------------------------------------------------


async def test_b28_base64_sentinel_name_is_decoded(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": "hi"}}, headers={"mcp-name": b64("echo")})
    assert response.status_code == 200
    assert tool_text(result_of(response)) == "hi"


async def test_b28_base64_sentinel_punctuated_name(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "a.b-c/d_e", "arguments": {}}, headers={"mcp-name": b64("a.b-c/d_e")})
    assert response.status_code == 200
    assert tool_text(result_of(response)) == "ok"


async def test_b28_base64_sentinel_of_other_name_is_header_mismatch(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": "x"}}, headers={"mcp-name": b64("add")}, request_id=9)
    assert_error(response, 400, -32020, request_id=9)


@pytest.mark.parametrize(
    "value",
    ["=?base64?!!!notbase64?=", "=?base64?ZWNobw?=", "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?="],
    ids=["bad-alphabet", "bad-padding", "not-utf8"],
)
async def test_b28_malformed_sentinel_is_header_mismatch(wire: Wire, value: str) -> None:
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": "x"}}, headers={"mcp-name": value}, request_id=10)
    assert_error(response, 400, -32020, request_id=10)


async def test_b28_uppercase_sentinel_markers_are_literal(wire: Wire) -> None:
    upper = "=?BASE64?" + base64.b64encode(b"echo").decode() + "?="
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": "x"}}, headers={"mcp-name": upper}, request_id=11)
    assert_error(response, 400, -32020, request_id=11)


async def test_b28_unicode_output_arrives_byte_exact(wire: Wire) -> None:
    text = "Załączniki/报告 ✅.pdf 🎉"
    response = await wire.modern("tools/call", {"name": "echo", "arguments": {"t": text}})
    assert tool_text(result_of(response)) == text
    assert text.encode("utf-8") in response.content


# -- Mcp-Param-* ----------------------------------------------------------------------------


async def test_mcp_param_header_required_and_compared(wire: Wire) -> None:
    ok = await wire.modern("tools/call", {"name": "region_tool", "arguments": {"region": "eu-west"}}, headers={"mcp-param-region": "eu-west"})
    assert ok.status_code == 200
    missing = await wire.modern("tools/call", {"name": "region_tool", "arguments": {"region": "eu-west"}}, request_id=12)
    assert_error(missing, 400, -32020, request_id=12)
    wrong = await wire.modern("tools/call", {"name": "region_tool", "arguments": {"region": "eu-west"}}, headers={"mcp-param-region": "us"}, request_id=13)
    assert_error(wrong, 400, -32020, request_id=13)
    encoded = await wire.modern("tools/call", {"name": "region_tool", "arguments": {"region": "zürich"}}, headers={"mcp-param-region": b64("zürich")})
    assert encoded.status_code == 200
    assert tool_text(result_of(encoded)) == "zürich"


async def test_tools_list_advertises_x_mcp_header(wire: Wire) -> None:
    result = result_of(await wire.modern("tools/list"))
    tool = next(t for t in result["tools"] if t["name"] == "region_tool")
    assert tool["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"


# -- removed methods and other HTTP verbs ----------------------------------------------------


@pytest.mark.parametrize(
    "method,params",
    [
        ("initialize", {"protocolVersion": MODERN, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}),
        ("ping", {}),
        ("logging/setLevel", {"level": "debug"}),
        ("resources/subscribe", {"uri": "test://x"}),
        ("resources/unsubscribe", {"uri": "test://x"}),
        ("unknown/method", {}),
    ],
)
async def test_removed_methods_are_404_method_not_found(wire: Wire, method: str, params: dict[str, Any]) -> None:
    response = await wire.modern(method, params, request_id="r-1")
    assert_error(response, 404, -32601, request_id="r-1")
    assert "mcp-session-id" not in response.headers


async def test_b23_enveloped_initialize_is_not_served_as_legacy(wire: Wire) -> None:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    response = await wire.modern("initialize", params, request_id=1)
    assert_error(response, 404, -32601, request_id=1)
    assert "mcp-session-id" not in response.headers


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
async def test_get_and_delete_with_modern_header_are_405(client: Any, verb: str) -> None:
    response = await client.request(verb, "/mcp", headers={"mcp-protocol-version": MODERN, "accept": "text/event-stream"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_modern_notification_with_unsupported_version_is_rejected(wire: Wire) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "_meta": modern_meta("2099-01-01")}}
    response = await wire.post(body, {"mcp-protocol-version": "2099-01-01"})
    assert response.status_code == 400
    assert final_message(response)["error"]["code"] == -32022


async def test_modern_response_post_is_rejected(wire: Wire) -> None:
    response = await wire.post({"jsonrpc": "2.0", "id": 1, "result": {}}, {"mcp-protocol-version": MODERN})
    assert 400 <= response.status_code < 500


async def test_every_modern_result_has_result_type(wire: Wire) -> None:
    for method, params in (
        ("server/discover", None),
        ("tools/list", None),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
        ("tools/call", {"name": "add", "arguments": {"a": "bad"}}),
        ("tools/call", {"name": "a.b-c/d_e", "arguments": {}}),
    ):
        result = result_of(await wire.modern(method, params))
        assert result["resultType"] == "complete", (method, result)
        check_result(method, MODERN, result)


async def test_unknown_tool_modern_is_400_invalid_params(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "no_such_tool", "arguments": {}}, request_id=31)
    assert_error(response, 400, -32602, request_id=31)


async def test_tools_call_without_name_is_invalid_params(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"arguments": {}}, headers={"mcp-name": None}, request_id=32)
    error = error_of_400(response)
    assert error["code"] in (-32602, -32020)


async def test_a_method_of_the_other_era_says_which_era_serves_it() -> None:
    """2026 ``ping`` / ``initialize`` and 2025 ``server/discover`` stay -32601 (404), with a
    message and recovery hint naming the era that has them; an unknown method keeps the plain one."""
    from conftest import Wire, error_of, make_app, make_router, open_client

    async with open_client(make_app(make_router())) as client:
        wire = Wire(client)
        ping = await wire.modern("ping", {}, check=False)
        assert ping.status_code == 404
        error = error_of(ping)
        assert error["code"] == -32601 and "2025 handshake era" in error["message"]
        assert error["data"]["recovery"]["hint"].startswith("Send it at a protocol version of that era")
        await wire.initialize()
        discover = await wire.legacy("server/discover", {}, check=False)
        assert "2026-07-28 era" in error_of(discover)["message"]
        unknown = error_of(await wire.modern("no/such", {}, check=False))
        assert unknown["message"] == "Method not found" and unknown["data"]["method"] == "no/such"


async def test_a_header_mismatch_carries_a_recovery_hint() -> None:
    from conftest import Wire, error_of, make_app, make_router, open_client

    async with open_client(make_app(make_router())) as client:
        wire = Wire(client)
        response = await wire.modern("tools/list", {}, headers={"Mcp-Method": "tools/call"}, check=False)
    error = error_of(response)
    assert response.status_code == 400 and error["code"] == -32020
    assert "Mcp-Method" in error["data"]["recovery"]["hint"]
