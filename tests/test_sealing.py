"""Sealed requestState (``fastapi_mcp_ctx._auth.sealing``): AEAD tokens bound to caller, operation and
arguments; key rotation; expiry; size cap; the router's refusal to start without a shared key."""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import subprocess
import sys
from dataclasses import replace
from typing import Any

import anyio
import httpx
import pytest
from conftest import MODERN, Wire, make_app, mcp_settings, modern_meta, open_client
from fastapi import Depends, FastAPI, Header
from pydantic import BaseModel
from serving import uvicorn_process

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx._auth.sealing import RequestStateSealer, StateBinding, arguments_digest, shared_store_names
from fastapi_mcp_ctx.auth import Principal
from fastapi_mcp_ctx.backends.memory import MemoryBackend
from fastapi_mcp_ctx.errors import ConfigurationError, InvalidRequestStateError, RequestStateTooLargeError

KEY_A, KEY_B = secrets.token_bytes(32), secrets.token_bytes(32)
ALICE = Principal("alice", tenant_id="acme", client_id="app-1")
BINDING = StateBinding.for_call(ALICE, "tools/call", "delete_file", {"path": "/a.txt", "force": True})


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def refused(sealer: RequestStateSealer, token: str, binding: StateBinding = BINDING) -> InvalidRequestStateError:
    with pytest.raises(InvalidRequestStateError) as info:
        sealer.open(token, binding)
    return info.value


def test_round_trip_gives_the_plain_state_back_and_hides_it() -> None:
    sealer = RequestStateSealer([KEY_A])
    plain = json.dumps({"step": 2, "answers": {"format": "csv"}, "note": "héllo"})
    token = sealer.seal(plain, BINDING)
    assert sealer.open(token, BINDING) == plain
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert b"csv" not in base64.urlsafe_b64decode(token + "==") and "step" not in token
    assert sealer.seal(plain, BINDING) != token  # a fresh nonce each time
    assert sealer.open(sealer.seal("", BINDING), BINDING) == ""


@pytest.mark.parametrize(
    "other",
    [
        replace(BINDING, tenant_id="globex"),
        replace(BINDING, tenant_id=None),
        replace(BINDING, client_id="app-2"),
        replace(BINDING, subject="mallory"),
        StateBinding.for_call(ALICE, "tools/call", "delete_folder", {"path": "/a.txt", "force": True}),
        StateBinding.for_call(ALICE, "prompts/get", "delete_file", {"path": "/a.txt", "force": True}),
        StateBinding.for_call(ALICE, "tools/call", "delete_file", {"path": "/b.txt", "force": True}),
        StateBinding.for_call(ALICE, "tools/call", "delete_file", {"path": "/a.txt", "force": 1}),
        StateBinding.for_call(ALICE, "tools/call", "delete_file", {"path": "/a.txt", "force": True, "x": None}),
        StateBinding.for_call(ALICE, "tools/call", "delete_file", {"path": "/a.txt"}),
        StateBinding.for_call(None, "tools/call", "delete_file", {"path": "/a.txt", "force": True}),
    ],
    ids=["tenant", "no-tenant", "client", "subject", "tool", "method", "argument", "type", "extra-arg", "missing-arg", "anon"],
)
def test_a_state_minted_for_one_call_opens_for_no_other(other: StateBinding, caplog: pytest.LogCaptureFixture) -> None:
    sealer = RequestStateSealer([KEY_A])
    token = sealer.seal("secret-step", BINDING)
    with caplog.at_level(logging.WARNING, "fastapi_mcp_ctx"):
        error = refused(sealer, token, other)
    envelope = error.to_error(7)
    assert envelope["code"] == -32602 and envelope["data"]["reason"] == "invalid_request_state"
    assert "secret" not in json.dumps(envelope) and "authentication" not in json.dumps(envelope)
    assert "authentication failed" in caplog.text  # the cause goes to the server log only


def test_argument_digest_is_canonical_and_complete() -> None:
    assert arguments_digest({"a": 1, "b": [1, {"y": 2, "x": 1}]}) == arguments_digest({"b": [1, {"x": 1, "y": 2}], "a": 1})
    assert arguments_digest(None) == arguments_digest({})
    assert len({arguments_digest(v) for v in ({"a": 1}, {"a": 1.0}, {"a": "1"}, {"a": [1]}, {"A": 1})}) == 5


def test_tampered_forged_and_garbled_tokens_are_refused(caplog: pytest.LogCaptureFixture) -> None:
    sealer = RequestStateSealer([KEY_A])
    token = sealer.seal("state", BINDING)
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    for index in (0, 3, 7, 20, len(raw) - 1):  # version, key id, expiry, nonce, tag
        flipped = bytearray(raw)
        flipped[index] ^= 1
        refused(sealer, base64.urlsafe_b64encode(bytes(flipped)).rstrip(b"=").decode())
    forged = base64.urlsafe_b64encode(bytes([1]) + raw[1:5] + secrets.token_bytes(60)).decode().rstrip("=")
    with caplog.at_level(logging.WARNING, "fastapi_mcp_ctx"):
        for bad in (forged, "", "abc", token[:-4], token + "A", token.replace(token[10], "+"), "x" * 70_000):
            refused(sealer, bad)
        refused(sealer, 42)  # type: ignore[arg-type]
    assert "not base64url" in caplog.text and "too short" in caplog.text and "above MCP_REQUEST_STATE_MAX_BYTES" in caplog.text


def test_expiry_is_checked_after_the_tag(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    sealer = RequestStateSealer([KEY_A], ttl_seconds=900, clock=clock)
    token = sealer.seal("state", BINDING)
    clock.now += 899.5
    assert sealer.open(token, BINDING) == "state"
    clock.now += 1
    with caplog.at_level(logging.WARNING, "fastapi_mcp_ctx"):
        refused(sealer, token)
    assert "expired 0.5 s ago" in caplog.text


def test_rotation_first_key_seals_every_key_opens() -> None:
    old = RequestStateSealer([KEY_A])
    rotated = RequestStateSealer([KEY_B, KEY_A])
    dropped = RequestStateSealer([KEY_B])
    from_old = old.seal("v", BINDING)
    assert rotated.open(from_old, BINDING) == "v"
    from_rotated = rotated.seal("w", BINDING)
    assert dropped.open(from_rotated, BINDING) == "w"  # sealed with the first key, KEY_B
    refused(old, from_rotated)
    refused(dropped, from_old)
    assert old.shared and not RequestStateSealer().shared


def test_without_keys_the_process_key_is_random_and_reused() -> None:
    one, two = RequestStateSealer(), RequestStateSealer()
    assert two.open(one.seal("s", BINDING), BINDING) == "s"  # one process, one key
    refused(RequestStateSealer([KEY_A]), one.seal("s", BINDING))


def test_short_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        RequestStateSealer([b"x" * 31])


def test_size_cap_is_a_server_error_never_a_truncation() -> None:
    sealer = RequestStateSealer([KEY_A], max_bytes=1024)
    fits = "x" * 700
    assert sealer.sealed_size(fits) <= 1024 and sealer.open(sealer.seal(fits, BINDING), BINDING) == fits
    with pytest.raises(RequestStateTooLargeError) as info:
        sealer.seal("x" * 800, BINDING)
    envelope = info.value.to_error(1)
    assert envelope["code"] == -32603 and info.value.http_status == 500
    assert envelope["data"]["reason"] == "request_state_too_large" and "MCP_REQUEST_STATE_MAX_BYTES" in envelope["message"]
    with pytest.raises(TypeError):
        sealer.seal(b"bytes", BINDING)  # type: ignore[arg-type]


def test_from_settings_reads_keys_ttl_and_cap() -> None:
    key = base64.urlsafe_b64encode(KEY_A).decode().rstrip("=")
    settings = mcp_settings(request_state_key=f"{KEY_B.hex()},{key}", request_state_ttl_seconds=60, request_state_max_bytes=4096)
    sealer = RequestStateSealer.from_settings(settings)
    assert sealer.ttl_seconds == 60 and sealer.max_bytes == 4096 and sealer.shared
    assert RequestStateSealer([KEY_B]).open(sealer.seal("s", BINDING), BINDING) == "s"
    assert sealer.open(RequestStateSealer([KEY_A]).seal("t", BINDING), BINDING) == "t"


# -- the router ---------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "postgresql+asyncpg://u@127.0.0.1:1/db"])
def test_router_refuses_to_start_with_a_shared_store_and_no_key(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        McpRouter(settings=mcp_settings(storage_url=url, request_state_key=None))
    text = info.value.message
    assert "MCP_REQUEST_STATE_KEY" in text and "fastapi-mcp-ctx keygen" in text and "ctx.state" in text
    assert "127.0.0.1" not in text  # never the URL
    router = McpRouter(settings=mcp_settings(storage_url=url, request_state_key=secrets.token_urlsafe(32)))
    assert router.request_state.shared


def test_shared_sessions_count_as_shared() -> None:
    class RedisSessionStore:  # stands for any session store outside this process
        pass

    settings = mcp_settings(request_state_key=None)
    assert shared_store_names(settings, state_backend=MemoryBackend()) == []
    assert shared_store_names(settings, state_backend=MemoryBackend(), session_store=RedisSessionStore()) == [
        "sessions (RedisSessionStore)"
    ]
    with pytest.raises(ConfigurationError, match="sessions"):
        McpRouter(settings=settings, session_store=RedisSessionStore())  # type: ignore[arg-type]


async def test_router_without_a_key_logs_once_at_its_first_request_and_seals_with_the_process_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The notice waits for the first request (the application's logging exists by then; at
    import, when the router is built, it reached no handler) and is logged once a process."""
    import fastapi_mcp_ctx._auth.sealing as sealing

    sealing._warned = False  # pyright: ignore[reportPrivateUsage]
    with caplog.at_level(logging.INFO, "fastapi_mcp_ctx"):
        first = McpRouter(settings=mcp_settings(request_state_key=None))
        second = McpRouter(settings=mcp_settings(request_state_key=None, storage_url="sqlite+aiosqlite:///x.db"))
        assert not [r for r in caplog.records if "MCP_REQUEST_STATE_KEY is not set" in r.getMessage()]
        for router in (first, second):
            async with open_client(make_app(router)) as client:
                await Wire(client).request("modern", "server/discover")
    warnings = [r for r in caplog.records if "MCP_REQUEST_STATE_KEY is not set" in r.getMessage()]
    assert len(warnings) == 1 and "replica" in warnings[0].getMessage() and warnings[0].levelno == logging.INFO
    assert not first.request_state.shared
    assert second.request_state.open(first.request_state.seal("s", BINDING), BINDING) == "s"


def test_cryptography_loads_only_when_a_state_is_sealed() -> None:
    code = (
        "import sys\n"
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_ctx import McpRouter\n"
        "from fastapi_mcp_ctx._auth.sealing import StateBinding\n"
        "router = McpRouter(); FastAPI().include_router(router)\n"
        "assert 'cryptography' not in sys.modules, 'imported at start-up'\n"
        "router.request_state.seal('s', StateBinding(None, None, None, 'tools/call t', ''))\n"
        "assert 'cryptography' in sys.modules\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr


# -- across processes ---------------------------------------------------------------------

_SEAL_IN_CHILD = (
    "import os, sys\n"
    "from fastapi_mcp_ctx.settings import McpSettings\n"
    "from fastapi_mcp_ctx._auth.sealing import RequestStateSealer, StateBinding\n"
    "from fastapi_mcp_ctx.auth import Principal\n"
    "binding = StateBinding.for_call(Principal('alice', tenant_id='acme', client_id='app-1'), 'tools/call', 'delete_file',"
    " {'path': '/a.txt', 'force': True})\n"
    "print(RequestStateSealer.from_settings(McpSettings()).seal('from-the-child', binding))\n"
)


def test_a_state_sealed_by_another_process_opens_with_the_same_key_only() -> None:
    key_a, key_b = (base64.urlsafe_b64encode(k).decode().rstrip("=") for k in (KEY_A, KEY_B))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")} | {"MCP_REQUEST_STATE_KEY": key_a}
    proc = subprocess.run([sys.executable, "-c", _SEAL_IN_CHILD], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    token = proc.stdout.strip()

    def here(keys: str) -> RequestStateSealer:
        return RequestStateSealer.from_settings(mcp_settings(request_state_key=keys))

    assert here(key_a).open(token, BINDING) == "from-the-child"
    assert here(f"{key_b},{key_a}").open(token, BINDING) == "from-the-child"  # rotation: still opens
    refused(here(key_b), token)  # another key, or rotation dropped the child's key
    refused(RequestStateSealer(), token)  # this process's random key


# -- over the wire: what a handler returned comes back only to the same call -----------------

E2E_USERS = {
    "alice-acme": Principal("alice", tenant_id="acme", client_id="app"),
    "alice-globex": Principal("alice", tenant_id="globex", client_id="app"),
    "alice-other-app": Principal("alice", tenant_id="acme", client_id="other-app"),
    "bob-acme": Principal("bob", tenant_id="acme", client_id="app"),
}
FORM = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


class Pick(BaseModel):
    choice: str


def e2e_authenticate(authorization: str = Header()) -> Principal:
    return E2E_USERS[authorization]


def e2e_app(**settings: Any) -> FastAPI:
    router = McpRouter(settings=mcp_settings(session_mode="stateless", **settings), authenticate=e2e_authenticate)

    async def pick(ctx: Context) -> str:
        answer = await ctx.elicit("Pick one", Pick)
        return f"{ctx.auth.subject}@{ctx.tenant_id}:{answer.data.choice if answer.data else answer.action}"

    @router.tool()
    async def first_tool(item: str, ctx: Context = Depends(mcp_context)) -> str:
        """Ask, then answer."""
        return f"{item}:" + await pick(ctx)

    @router.tool()
    async def second_tool(item: str, ctx: Context = Depends(mcp_context)) -> str:
        """Ask, then answer (another tool)."""
        return f"{item}:" + await pick(ctx)

    @router.tool()
    async def big_state(ctx: Context = Depends(mcp_context)) -> str:
        """Hand back more state than the cap."""
        ctx.request_input(request_state="x" * 5000)

    app = FastAPI()
    app.include_router(router)
    return app


async def e2e_call(wire: Wire, user: str, tool: str = "first_tool", item: str = "a", **extra: Any) -> dict[str, Any]:
    params = {"name": tool, "arguments": {"item": item}, **extra}
    return (await wire.modern("tools/call", params, meta=FORM, headers={"authorization": user}, check=False)).json()


@pytest.mark.parametrize(
    ("user", "tool", "item"),
    [
        ("alice-globex", "first_tool", "a"),  # another tenant, same subject
        ("alice-other-app", "first_tool", "a"),  # another OAuth client
        ("bob-acme", "first_tool", "a"),  # another user
        ("alice-acme", "second_tool", "a"),  # another tool
        ("alice-acme", "first_tool", "b"),  # other arguments
    ],
    ids=["tenant", "client", "user", "tool", "arguments"],
)
async def test_a_sealed_state_is_refused_for_another_call(user: str, tool: str, item: str, caplog: pytest.LogCaptureFixture) -> None:
    async with open_client(e2e_app()) as client:
        wire = Wire(client)
        asked = (await e2e_call(wire, "alice-acme"))["result"]
        assert asked["resultType"] == "input_required"
        retry = {"requestState": asked["requestState"], "inputResponses": {"elicit-1": {"action": "accept", "content": {"choice": "x"}}}}
        with caplog.at_level(logging.WARNING, "fastapi_mcp_ctx"):
            refused = await e2e_call(wire, user, tool, item, **retry)
        error = refused["error"]
        assert error["code"] == -32602 and error["data"]["reason"] == "invalid_request_state"
        assert set(error["data"]) == {"requestId", "reason", "recovery"}  # nothing about why
        assert "authentication failed" in caplog.text
        accepted = await e2e_call(wire, "alice-acme", **retry)
        assert accepted["result"]["content"][0]["text"] == "a:alice@acme:x"


async def test_expired_and_tampered_states_are_refused() -> None:
    async with open_client(e2e_app(request_state_ttl_seconds=0.5)) as client:
        wire = Wire(client)
        state = (await e2e_call(wire, "alice-acme"))["result"]["requestState"]
        tampered = state[:-3] + ("AAA" if state[-3:] != "AAA" else "BBB")
        for bad in (tampered, state[::-1], "", "not a state", 17):
            assert (await e2e_call(wire, "alice-acme", requestState=bad))["error"]["data"]["reason"] == "invalid_request_state"
        await anyio.sleep(0.7)
        assert (await e2e_call(wire, "alice-acme", requestState=state))["error"]["data"]["reason"] == "invalid_request_state"


async def test_a_state_above_the_cap_is_a_server_error_not_a_truncation() -> None:
    async with open_client(e2e_app(request_state_max_bytes=1024)) as client:
        response = await Wire(client).modern("tools/call", {"name": "big_state", "arguments": {}}, meta=FORM,
                                             headers={"authorization": "alice-acme"}, check=False)  # fmt: skip
    error = response.json()["error"]  # a JSON-RPC error (HTTP status as the dispatcher maps -32603 in 2026)
    assert error["code"] == -32603 and error["data"]["reason"] == "request_state_too_large"
    assert "result" not in response.json() and "MCP_REQUEST_STATE_MAX_BYTES" in error["message"]


async def test_a_state_from_another_process_opens_with_its_key_only() -> None:
    """A real uvicorn process (key A) asks; in-process routers with A, with B then A (rotation),
    with B only (a different key, or rotation dropped A) and with no key try the retry."""
    key_a, key_b = (base64.urlsafe_b64encode(k).decode().rstrip("=") for k in (KEY_A, KEY_B))
    params = {"name": "export_report", "arguments": {"report_id": "r1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**params, "_meta": {**modern_meta(), **FORM}}}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN, "mcp-method": "tools/call",
               "mcp-name": "export_report"}  # fmt: skip
    with uvicorn_process("examples.input_required:app", env={"MCP_REQUEST_STATE_KEY": key_a}) as (_, url, _log):
        async with httpx.AsyncClient(timeout=10) as client:
            asked = (await client.post(url, json=body, headers=headers)).json()["result"]
    assert asked["resultType"] == "input_required" and "format" in asked["inputRequests"]
    retry = {**params, "requestState": asked["requestState"], "inputResponses": {"format": {"action": "accept", "content": {"format": "csv"}}}}

    from examples.input_required import router as example_router

    async def retry_with(keys: str | None) -> dict[str, Any]:
        router = McpRouter(settings=mcp_settings(request_state_key=keys, session_mode="stateless"))
        router.registry = example_router.registry  # the same tools, another process's settings
        router.dispatcher.registry = example_router.registry
        app = FastAPI()
        app.include_router(router)
        async with open_client(app) as client:
            return (await Wire(client).modern("tools/call", retry, meta=FORM, check=False)).json()

    assert (await retry_with(key_a))["result"]["structuredContent"] == {"url": "https://reports.example/r1.csv"}
    assert (await retry_with(f"{key_b},{key_a}"))["result"]["structuredContent"] == {"url": "https://reports.example/r1.csv"}
    for keys in (key_b, None):
        assert (await retry_with(keys))["error"]["data"]["reason"] == "invalid_request_state"
