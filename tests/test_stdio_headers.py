"""stdio for a real app: headers for the synthetic request, and ``authenticate=`` run as over HTTP.

The app is docs/examples/stdio/orders.py (an ``X-API-Key: str = Header()`` dependency, a tenant
from ``authenticate=``), launched by the official client's stdio transport exactly as the
desktop client's JSON config shown in docs/stdio.md launches it (command, args, env), in both
eras. Raw pipes check what the client cannot show: a wrong or missing key is ``-32001`` naming
where stdio's headers come from, a key value never reaches the server's log, a malformed
``--header`` stops the start with exit 2, ``app.dependency_overrides`` reach ``authenticate=``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import jwt
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from stdio_wire import MODERN, envelope, rpc, server_env, spawn
from test_docs import code_blocks

from fastapi_mcp_ctx._stdio.headers import stdio_headers
from fastapi_mcp_ctx.errors import AppLoadError

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "stdio"
CONFIG = EXAMPLE / "claude_desktop_config.json"
SECRET = "key-acme"  # the API key of docs/examples/stdio/claude_desktop_config.json


def _python_path() -> str:
    return os.pathsep.join([str(EXAMPLE), str(REPO)])  # this checkout's package, not an installed one


def _desktop_launch() -> StdioServerParameters:
    """The server the JSON config describes, its machine paths (``/Users/you/...``) made this checkout's."""
    server = json.loads(CONFIG.read_text(encoding="utf-8"))["mcpServers"]["orders"]
    command = Path(sys.executable).parent / Path(server["command"]).name  # the venv's fastapi-mcp-ctx
    assert command.exists(), f"{command}: the console script the config runs (pip install -e .)"
    env = {**server_env(), **server["env"], "PYTHONPATH": _python_path()}
    return StdioServerParameters(command=str(command), args=server["args"], env=env, cwd=str(EXAMPLE))


def _structured(result: types.CallToolResult) -> Any:
    assert result.is_error is False, result
    return result.structured_content


# -- the official client, launched as the desktop config says --------------------------------
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_desktop_config_launch_serves_api_key_tools_with_their_tenant(mode: str, tmp_path: Path) -> None:
    with (tmp_path / "server-stderr.txt").open("w") as errlog:
        with anyio.fail_after(30):
            async with Client(stdio_client(_desktop_launch(), errlog=errlog), mode=mode, cache=None) as client:
                assert client.protocol_version == (MODERN if mode == MODERN else "2025-11-25")
                assert {t.name for t in (await client.list_tools()).tools} == {"add_order", "list_orders"}
                first = _structured(await client.call_tool("add_order", {"item": "anvil"}))
                # the header dependency got X-API-Key; ctx.state is the tenant authenticate= gave
                assert first == {"tenant": "acme", "state_tenant": "acme", "orders": ["anvil"]}
                second = _structured(await client.call_tool("add_order", {"item": "rocket"}))
                assert second["orders"] == ["anvil", "rocket"]
                assert _structured(await client.call_tool("list_orders", {})) == {"result": ["anvil", "rocket"]}
    assert SECRET not in (tmp_path / "server-stderr.txt").read_text(encoding="utf-8")


# -- raw pipes ----------------------------------------------------------------------------------
def _env(**extra: str) -> dict[str, str]:
    return server_env(PYTHONPATH=_python_path(), MCP_LOG_LEVEL="debug", **extra)


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def test_header_option_and_dependency_overrides_reach_authenticate(tmp_path: Path) -> None:
    async with spawn(tmp_path, "--header", "X-API-Key=override-key", app="stdio_auth_app:app", env=_env(), cwd=REPO / "tests") as server:
        await server.initialize()
        reply = await server.request("tools/call", _call("add_order", {"item": "stapler"}), 1)
        assert reply["result"]["structuredContent"] == {"tenant": "initech", "state_tenant": "initech", "orders": ["stapler"]}
        await server.close_stdin()
        assert await server.wait() == 0
    assert "override-key" not in server.stderr()


async def test_the_command_line_header_wins_over_the_environment(tmp_path: Path) -> None:
    env = _env(MCP_STDIO_HEADER_X_API_KEY="key-acme")
    async with spawn(tmp_path, "--header", "x-api-key: key-globex", app="orders:app", env=env, cwd=EXAMPLE) as server:
        await server.initialize()
        reply = await server.request("tools/call", _call("add_order", {"item": "x"}), 1)
        assert reply["result"]["structuredContent"]["tenant"] == "globex"
        await server.close_stdin()
        assert await server.wait() == 0


@pytest.mark.parametrize("headers", [(), ("--header", "X-API-Key=wrong-key-value")], ids=["missing", "wrong"])
async def test_missing_or_wrong_key_is_refused_naming_where_stdio_headers_come_from(headers: tuple[str, ...], tmp_path: Path) -> None:
    async with spawn(tmp_path, *headers, app="orders:app", env=_env(), cwd=EXAMPLE) as server:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}
        reply = await server.request("initialize", params, "init")
        assert reply["error"]["code"] == -32001  # 401, as over HTTP
        assert "--header NAME=VALUE" in reply["error"]["message"]
        assert "MCP_STDIO_HEADER_<NAME>" in reply["error"]["message"]
        if not headers:  # the missing Header() is named, as for a tool's dependency
            assert "header.x-api-key: Field required" in reply["error"]["message"]
        # a 2026 request (no handshake) is refused the same way, with its own id
        reply = await server.request("tools/call", {**_call("list_orders", {}), "_meta": envelope()}, 7)
        assert reply["error"]["code"] == -32001 and "MCP_STDIO_HEADER_<NAME>" in reply["error"]["message"]
        await server.close_stdin()
        assert await server.wait() == 0
    assert "wrong-key-value" not in server.stderr()


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (("--header", "X-API-Key"), {}, "expected NAME=VALUE"),
        (("--header", "Bad Name=v1-secret"), {}, "'Bad' followed by a space (value not shown; write NAME=VALUE) is not an HTTP header name"),
        (("--header", "Host=v1-secret"), {}, "the Host header is the transport's own"),
        ((), {"MCP_STDIO_HEADER_X_API_KEY": "v1-secret\nInjected: 1"}, "MCP_STDIO_HEADER_X_API_KEY: the value of the x-api-key header"),
    ],
)
async def test_a_malformed_header_stops_the_start_without_showing_its_value(
    args: tuple[str, ...], env: dict[str, str], named: str, tmp_path: Path
) -> None:
    async with spawn(tmp_path, *args, app="orders:app", env=_env(**env), cwd=EXAMPLE) as server:
        assert await server.wait(timeout=15) == 2
        assert await server.rest_of_stdout() == []  # the refusal goes to stderr only (B59)
    stderr = server.stderr()
    assert named in stderr
    assert "v1-secret" not in stderr


# -- the parser -------------------------------------------------------------------------------
def test_stdio_headers_reads_the_environment_and_the_options() -> None:
    environ = {"MCP_STDIO_HEADER_X_API_KEY": " k1 ", "MCP_STDIO_HEADER_X_TRACE": "t", "MCP_OTHER": "no", "LANG": "C.UTF-8"}
    assert stdio_headers(["Authorization: Bearer abc", "x-trace=override"], environ) == [
        (b"x-api-key", b"k1"),
        (b"x-trace", b"override"),
        (b"authorization", b"Bearer abc"),
    ]
    assert stdio_headers([], {}) == []
    with pytest.raises(AppLoadError, match=r"--header: expected NAME=VALUE or 'Name: value'") as refused:
        stdio_headers(["sk-live-secret"])
    assert "sk-live-secret" not in str(refused.value)
    with pytest.raises(AppLoadError, match="not latin-1") as refused:
        stdio_headers(["X-Key=sécret☃"])
    assert "sécret" not in str(refused.value)


def test_the_stdio_guide_shows_these_files() -> None:
    shown = {title: code for _, title, code in code_blocks(REPO / "docs" / "stdio.md") if title}
    for name in ("orders.py", "claude_desktop_config.json"):
        title = f"docs/examples/stdio/{name}"
        assert shown.get(title) == (REPO / title).read_text(encoding="utf-8"), f"docs/stdio.md does not show {title} as it is"


# -- MCP_AUTH_MODE=jwt: the bearer gate, as over HTTP ---------------------------------------------
async def test_jwt_mode_verifies_the_bearer_token_given_as_a_header(tmp_path: Path) -> None:
    secret = "s" * 40
    now = int(time.time())
    claims = {"iss": "https://issuer.test", "aud": "mcp-test", "sub": "alice", "tid": "tenant-a", "iat": now, "exp": now + 600}
    token = jwt.encode(claims, secret, algorithm="HS256")
    env = server_env(
        PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]),
        MCP_AUTH_MODE="jwt",
        MCP_JWT_SECRET=secret,
        MCP_JWT_ISSUER="https://issuer.test",
        MCP_JWT_AUDIENCE="mcp-test",
        MCP_RESOURCE_URL="https://mcp.example.test/mcp",
    )
    async with spawn(tmp_path, "--header", f"Authorization=Bearer {token}", "--header", "X-Author=bob", env=env) as server:
        await server.initialize()
        seen = (await server.request("tools/call", _call("whoami", {}), 1))["result"]["structuredContent"]
        assert seen == {"tenant": "tenant-a", "subject": "alice", "author": "bob"}
        await server.close_stdin()
        assert await server.wait() == 0
    assert token not in server.stderr()
    async with spawn(tmp_path, "--header", f"Authorization=Bearer {token}", env=env) as server:  # a batch line: one admission
        await server.initialize("2025-03-26")
        await server.send([rpc("tools/call", _call("whoami", {}), 1), rpc("tools/call", _call("whoami", {}), 2)])
        answers = await server.recv_json()
        assert [a["result"]["structuredContent"]["tenant"] for a in answers] == ["tenant-a", "tenant-a"]
        await server.close_stdin()
        assert await server.wait() == 0
    async with spawn(tmp_path, env=env) as server:  # no token
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}
        reply = await server.request("initialize", params, "init")
        assert reply["error"]["code"] == -32001 and "MCP_STDIO_HEADER_<NAME>" in reply["error"]["message"]
        await server.close_stdin()
        assert await server.wait() == 0
