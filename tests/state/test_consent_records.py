"""Consent records on every backend: single use under concurrency (the record store alone, then 50
concurrent 2026 retries through the server carrying one consent id), never listed to handlers."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Any

import httpx
from fastapi import Depends, FastAPI

from fastapi_mcp_ctx import Context, McpRouter, McpSettings, mcp_context
from fastapi_mcp_ctx.consent import CONSENT_INPUT_KEY, ConsentRecord, ConsentRecords
from fastapi_mcp_ctx.state import ContextState, reserved_space

from .conftest import Env

KEY = "dGVzdC1vbmx5LXJlcXVlc3Qtc3RhdGUta2V5LTMyYnk"
RECORD = ConsentRecord("delete_file", "/a.txt", "sha256:abc", "tools/call delete_file", "app-1", "alice")
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


def records(env: Env, backend: Any = None, tenant: str = "acme") -> ConsentRecords:
    return ConsentRecords.of(ContextState(backend or env.backend, tenant))


async def test_a_record_redeems_once_and_only_as_issued(env: Env) -> None:
    store = records(env)
    record_id = await store.issue(RECORD, 600)
    assert await store.redeem(record_id, RECORD)
    assert not await store.redeem(record_id, RECORD)  # used
    for other in ("operation", "target", "content_hash", "call", "client_id", "subject"):
        fresh = await store.issue(RECORD, 600)
        assert not await store.redeem(fresh, replace(RECORD, **{other: "other"}))
        assert not await store.redeem(fresh, RECORD)  # a mismatch burns the record
    assert not await store.redeem("A" * 22, RECORD) and not await store.redeem("../../t/acme/x", RECORD)
    other_tenant = await store.issue(RECORD, 600)
    assert not await records(env, tenant="globex").redeem(other_tenant, RECORD)
    assert await store.redeem(other_tenant, RECORD)


async def test_a_record_expires(env: Env) -> None:
    store = records(env)
    record_id = await store.issue(RECORD, 1)
    await env.advance(1.5)
    assert not await store.redeem(record_id, RECORD)


async def test_records_are_invisible_to_ctx_state(env: Env) -> None:
    state = ContextState(env.backend, "acme")
    await state.set("notes/1", "n")
    record_id = await records(env).issue(RECORD, 600)
    page = await state.list()
    assert [item.key for item in page.items] == ["notes/1"]
    backend, prefix = reserved_space(state, "consent")
    assert prefix == "x/consent/acme/" and backend is env.backend
    assert await backend.get(prefix + record_id) is not None


async def test_fifty_concurrent_redeems_of_one_id_succeed_once(env: Env) -> None:
    clients = env.clients(50)  # distinct pools: as many "processes"
    record_id = await records(env).issue(RECORD, 600)
    outcomes = await asyncio.gather(*(records(env, backend).redeem(record_id, RECORD) for backend in clients))
    assert outcomes.count(True) == 1


# -- through the server: 50 concurrent retries carrying one consent id act exactly once -----


def consent_app(env: Env, acted: list[str]) -> FastAPI:
    router = McpRouter(
        settings=McpSettings(session_mode="stateless", request_state_key=KEY, log_level="warning"), state_backend=env.backend
    )

    @router.tool()
    async def delete_file(path: str, ctx: Context = Depends(mcp_context)) -> dict[str, str]:
        """Delete a file, once the user confirmed."""
        await ctx.consent.require(operation="delete_file", target=path, content_hash="v1", message=f"Delete {path}?")
        acted.append(path)
        return {"deleted": path}

    app = FastAPI()
    app.include_router(router)
    return app


async def test_fifty_concurrent_retries_carrying_one_consent_id_act_once(env: Env) -> None:
    acted: list[str] = []
    app = consent_app(env, acted)
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN,
               "mcp-method": "tools/call", "mcp-name": "delete_file"}  # fmt: skip
    params: dict[str, Any] = {"name": "delete_file", "arguments": {"path": f"/{uuid.uuid4().hex}.txt"}, "_meta": META}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        first = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers)
        asked = first.json()["result"]
        assert asked["resultType"] == "input_required" and CONSENT_INPUT_KEY in asked["inputRequests"]
        retry = {**params, "requestState": asked["requestState"],
                 "inputResponses": {CONSENT_INPUT_KEY: {"action": "accept", "content": {"confirm": True}}}}  # fmt: skip

        async def one(i: int) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": retry}
            return (await client.post("/mcp", json=body, headers=headers)).json()["result"]

        results = await asyncio.gather(*(one(i) for i in range(50)))
    done = [r for r in results if r.get("resultType") == "complete" and not r.get("isError")]
    again = [r for r in results if r.get("resultType") == "input_required"]
    assert len(acted) == 1 and len(done) == 1 and len(again) == 49  # the rest are asked afresh, never acted
    assert done[0]["structuredContent"] == {"deleted": params["arguments"]["path"]}
