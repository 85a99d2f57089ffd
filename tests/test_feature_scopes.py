"""``scopes=`` on resources and prompts, against the real loopback JWKS of tests/test_jwt_auth.py.

A caller without the scopes gets 403 ``insufficient_scope`` with the challenge naming the
operation's scopes (B54) on ``resources/read``, ``prompts/get``, ``completion/complete`` of a
scoped prompt or template and 2025 ``resources/subscribe``; the lists hide what it may not use
(``MCP_HIDE_UNAUTHORIZED_TOOLS``); the RFC 9728 ``scopes_supported`` and the 401 challenge name
every scope of tools, resources and prompts.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from conftest import Wire, error_of, mcp_settings, open_client, result_of
from fastapi import FastAPI
from jwt_support import METADATA_URL, RESOURCE, KeyServer, RsaKey, claims
from test_jwt_auth import ISSUER, bearer, challenge_params, idp, rsa_key

from fastapi_mcp_ctx import McpRouter

__all__ = ["idp", "rsa_key"]  # the JWKS fixtures, shared with test_jwt_auth.py


def scoped_app(idp: KeyServer, **overrides: Any) -> FastAPI:
    values: dict[str, Any] = {"auth_mode": "jwt", "jwt_jwks_url": idp.jwks_url, "jwt_issuer": ISSUER, "resource_url": RESOURCE}
    router = McpRouter(settings=mcp_settings(**{**values, **overrides}), resources_subscribe=True)

    @router.tool(scopes=["notes:write"])
    async def write_note(text: str) -> str:
        """Store a note."""
        return text

    @router.resource("docs://public")
    async def public() -> str:
        return "public"

    @router.resource("docs://secret", scopes=["docs:read"])
    async def secret() -> str:
        return "secret"

    @router.resource("docs://{doc_id}", scopes=["docs:read"], complete={"doc_id": lambda value: ["a1", "a2"]})
    async def doc(doc_id: str) -> str:
        return f"doc {doc_id}"

    @router.prompt()
    async def hello() -> str:
        return "hello"

    @router.prompt(scopes=["prompts:use"], complete={"topic": lambda value: ["x"]})
    async def summarize(topic: str) -> str:
        return f"summarize {topic}"

    app = FastAPI()
    app.include_router(router)
    return app


async def start(client: httpx.AsyncClient, era: str, headers: dict[str, str]) -> Wire:
    wire = Wire(client)
    if era == "legacy":
        await wire.initialize(headers=headers)
    return wire


def assert_refused(response: httpx.Response, scope: str) -> None:
    assert response.status_code == 403, response.text
    assert challenge_params(response) == {"error": "insufficient_scope", "scope": scope, "resource_metadata": METADATA_URL}
    error = error_of(response)
    assert error["code"] == -32003 and error["data"]["reason"] == "insufficient_scope"
    assert error["data"]["requiredScopes"] == [scope]


async def test_b54_a_caller_without_the_scopes_is_refused_and_sees_only_what_it_may_use(idp: KeyServer, rsa_key: RsaKey, era: str) -> None:
    reader = bearer(rsa_key.sign(claims(ISSUER, scope="notes:read")))
    async with open_client(scoped_app(idp)) as client:
        wire = await start(client, era, reader)

        async def ask(method: str, params: dict[str, Any]) -> httpx.Response:
            return await wire.request(era, method, params, headers=reader, check=False)

        assert_refused(await ask("resources/read", {"uri": "docs://secret"}), "docs:read")
        assert_refused(await ask("resources/read", {"uri": "docs://7"}), "docs:read")
        assert_refused(await ask("prompts/get", {"name": "summarize", "arguments": {"topic": "t"}}), "prompts:use")
        completion = {"ref": {"type": "ref/prompt", "name": "summarize"}, "argument": {"name": "topic", "value": ""}}
        assert_refused(await ask("completion/complete", completion), "prompts:use")
        completion = {"ref": {"type": "ref/resource", "uri": "docs://{doc_id}"}, "argument": {"name": "doc_id", "value": "a"}}
        assert_refused(await ask("completion/complete", completion), "docs:read")
        if era == "legacy":
            assert_refused(await ask("resources/subscribe", {"uri": "docs://secret"}), "docs:read")
            assert result_of(await ask("resources/subscribe", {"uri": "docs://public"})) == {}
        assert result_of(await ask("resources/read", {"uri": "docs://public"}))["contents"][0]["text"] == "public"
        assert [r["uri"] for r in result_of(await ask("resources/list", {}))["resources"]] == ["docs://public"]
        assert result_of(await ask("resources/templates/list", {}))["resourceTemplates"] == []
        assert [p["name"] for p in result_of(await ask("prompts/list", {}))["prompts"]] == ["hello"]


async def test_a_caller_with_the_scopes_reads_gets_completes_and_lists_everything(idp: KeyServer, rsa_key: RsaKey, era: str) -> None:
    granted = bearer(rsa_key.sign(claims(ISSUER, scope="docs:read prompts:use")))
    async with open_client(scoped_app(idp)) as client:
        wire = await start(client, era, granted)

        async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return result_of(await wire.request(era, method, params, headers=granted))

        assert (await ask("resources/read", {"uri": "docs://secret"}))["contents"][0]["text"] == "secret"
        assert (await ask("resources/read", {"uri": "docs://7"}))["contents"][0]["text"] == "doc 7"
        messages = (await ask("prompts/get", {"name": "summarize", "arguments": {"topic": "t"}}))["messages"]
        assert messages[0]["content"]["text"] == "summarize t"
        completion = {"ref": {"type": "ref/resource", "uri": "docs://{doc_id}"}, "argument": {"name": "doc_id", "value": "a"}}
        assert (await ask("completion/complete", completion))["completion"]["values"] == ["a1", "a2"]
        assert [r["uri"] for r in (await ask("resources/list", {}))["resources"]] == ["docs://public", "docs://secret"]
        assert [t["uriTemplate"] for t in (await ask("resources/templates/list", {}))["resourceTemplates"]] == ["docs://{doc_id}"]
        assert [p["name"] for p in (await ask("prompts/list", {}))["prompts"]] == ["hello", "summarize"]


async def test_with_hiding_off_the_lists_show_everything_and_reading_is_still_refused(idp: KeyServer, rsa_key: RsaKey) -> None:
    reader = bearer(rsa_key.sign(claims(ISSUER, scope="notes:read")))
    async with open_client(scoped_app(idp, hide_unauthorized_tools=False)) as client:
        wire = Wire(client)
        listed = result_of(await wire.modern("resources/list", {}, headers=reader))
        assert [r["uri"] for r in listed["resources"]] == ["docs://public", "docs://secret"]
        assert [p["name"] for p in result_of(await wire.modern("prompts/list", {}, headers=reader))["prompts"]] == ["hello", "summarize"]
        assert_refused(await wire.modern("resources/read", {"uri": "docs://secret"}, headers=reader, check=False), "docs:read")


async def test_the_metadata_and_the_401_challenge_name_every_scope_of_tools_resources_and_prompts(idp: KeyServer, era: str) -> None:
    every = ["docs:read", "notes:write", "prompts:use"]
    async with open_client(scoped_app(idp)) as client:
        document = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert document["scopes_supported"] == every
        wire = Wire(client)
        if era == "legacy":
            response = await wire.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, {})  # fmt: skip
        else:
            response = await wire.modern("resources/list", {}, check=False)
    assert response.status_code == 401, response.text
    assert challenge_params(response) == {"scope": " ".join(every), "resource_metadata": METADATA_URL}


def test_scopes_must_be_a_list_of_scope_tokens() -> None:
    router = McpRouter(settings=mcp_settings())

    async def read() -> str:
        return "x"

    with pytest.raises(TypeError, match="list of strings"):
        router.resource("docs://a", scopes="docs:read")(read)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="invalid scope"):
        router.prompt("p", scopes=["two words"])(read)
    assert len(router.features.resources) == 0 and len(router.features.prompts) == 0


async def test_lists_that_depend_on_the_callers_scopes_are_private_to_caches(idp: KeyServer, rsa_key: RsaKey) -> None:
    reader = bearer(rsa_key.sign(claims(ISSUER, scope="notes:read")))
    async with open_client(scoped_app(idp, cache_scope="public")) as client:
        wire = await start(client, "modern", reader)
        for method in ("tools/list", "resources/list", "resources/templates/list", "prompts/list"):
            result = result_of(await wire.request("modern", method, {}, headers=reader, check=False))
            assert result["cacheScope"] == "private", (method, result)
    async with open_client(scoped_app(idp, cache_scope="public", hide_unauthorized_tools=False)) as client:
        wire = await start(client, "modern", reader)
        result = result_of(await wire.request("modern", "tools/list", {}, headers=reader, check=False))
        assert result["cacheScope"] == "public"  # everyone sees the same list
