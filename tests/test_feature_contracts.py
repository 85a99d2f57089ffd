"""``errors=[ErrorContract(...)]`` on resources and prompts: ``ctx.fail`` and a raised failure with
a declared reason are the JSON-RPC error with the contract's code and ``data.recovery.hint``, in
both eras; the contracts are listed in the definition's ``_meta``; registration checks them."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from conftest import make_app, make_router
from fastapi import Depends

from fastapi_mcp_ctx import Context, ErrorContract, ToolError, mcp_context
from fastapi_mcp_ctx.errors import InvalidParamsError, McpResponseError
from fastapi_mcp_ctx.testing import McpTestClient

NOT_FOUND = ErrorContract("not_found", hint="Read notes://index for the ids that exist.", code=-32004, message="No such note.")
UNKNOWN_TOPIC = ErrorContract("unknown_topic", hint="Pick a topic from prompts/list.", code=-32602)
META = "fastapi-mcp-ctx/errors"


def _app() -> Any:
    router = make_router()

    @router.resource("notes://{note_id}/{how}", errors=[NOT_FOUND])
    async def note(note_id: int, how: str, ctx: Context[Literal["not_found"]] = Depends(mcp_context)) -> str:
        if how == "fail":
            ctx.fail("not_found", f"No note {note_id}", noteId=note_id)
        if how == "default_message":
            ctx.fail("not_found")
        if how == "raise":  # hint and code from the contract
            raise ToolError(f"No note {note_id}", reason="not_found", data={"noteId": note_id})
        if how == "protocol":  # a protocol error with a declared reason keeps its code, gains the hint
            raise InvalidParamsError("bad id", reason="not_found")
        if how == "undeclared":
            ctx.fail("gone")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        return f"note {note_id}"

    @router.resource("plain://x")
    async def plain(ctx: Context = Depends(mcp_context)) -> str:
        ctx.fail("not_found", "nope")

    @router.prompt(errors=[UNKNOWN_TOPIC])
    async def explain(topic: str, ctx: Context[Literal["unknown_topic"]] = Depends(mcp_context)) -> str:
        if topic != "mcp":
            ctx.fail("unknown_topic", f"No prompt about {topic}", topic=topic)
        return "Explain MCP."

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return _app()


async def failure(client: McpTestClient, method: str, params: dict[str, Any]) -> McpResponseError:
    with pytest.raises(McpResponseError) as caught:
        await client.request(method, params)
    return caught.value


def data_of(error: McpResponseError) -> dict[str, Any]:
    assert isinstance(error.data, dict)
    data: dict[str, Any] = dict(error.data)  # pyright: ignore[reportUnknownArgumentType]
    assert "requestId" in data
    del data["requestId"]
    return data


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_ctx_fail_in_a_resource_is_the_json_rpc_error_of_its_contract(app: Any, era: Any) -> None:
    hint = {"hint": NOT_FOUND.hint}
    async with McpTestClient(app, era=era) as client:
        failed = await failure(client, "resources/read", {"uri": "notes://7/fail"})
        raised = await failure(client, "resources/read", {"uri": "notes://7/raise"})
        default = await failure(client, "resources/read", {"uri": "notes://7/default_message"})
        protocol = await failure(client, "resources/read", {"uri": "notes://7/protocol"})
        served = await client.request("resources/read", {"uri": "notes://7/ok"})
    for error in (failed, raised):
        assert (error.code, error.message) == (-32004, "No note 7")
        assert data_of(error) == {"reason": "not_found", "recovery": hint, "noteId": 7}
    assert (default.code, default.message, data_of(default)) == (-32004, "No such note.", {"reason": "not_found", "recovery": hint})
    assert (protocol.code, protocol.message, data_of(protocol)) == (-32602, "bad id", {"reason": "not_found", "recovery": hint})
    assert served.result["contents"][0]["text"] == "note 7"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_ctx_fail_in_a_prompt_is_the_json_rpc_error_of_its_contract(app: Any, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        error = await failure(client, "prompts/get", {"name": "explain", "arguments": {"topic": "cobol"}})
        served = await client.request("prompts/get", {"name": "explain", "arguments": {"topic": "mcp"}})
    assert (error.code, error.message) == (-32602, "No prompt about cobol")
    assert data_of(error) == {"reason": "unknown_topic", "recovery": {"hint": UNKNOWN_TOPIC.hint}, "topic": "cobol"}
    assert served.result["messages"][0]["content"]["text"] == "Explain MCP."


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_undeclared_reason_is_a_generic_internal_error(app: Any, era: Any, caplog: pytest.LogCaptureFixture) -> None:
    async with McpTestClient(app, era=era) as client:
        undeclared = await failure(client, "resources/read", {"uri": "notes://1/undeclared"})
        bare = await failure(client, "resources/read", {"uri": "plain://x"})
    assert "declares no such error reason" in caplog.text and "'gone'" in caplog.text
    for error in (undeclared, bare):
        assert error.code == -32603 and "gone" not in error.message


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_contracts_are_listed_in_the_meta_of_the_template_and_the_prompt(app: Any, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        templates = (await client.request("resources/templates/list")).result["resourceTemplates"]
        static = (await client.request("resources/list")).result["resources"]
        prompts = (await client.request("prompts/list")).result["prompts"]
    assert templates[0]["_meta"][META] == [NOT_FOUND.listing()]
    assert prompts[0]["_meta"][META] == [{"reason": "unknown_topic", "code": -32602, "hint": UNKNOWN_TOPIC.hint}]
    assert "_meta" not in static[0]


def test_registration_checks_the_contracts() -> None:
    router = make_router()

    async def reads(ctx: Context[Literal["missing"]] = Depends(mcp_context)) -> str:
        return "x"

    with pytest.raises(ValueError, match="'missing'"):
        router.resource("a://b", errors=[NOT_FOUND])(reads)
    with pytest.raises(ValueError, match="'missing'"):
        router.prompt("p")(reads)
    with pytest.raises(ValueError, match="declared twice"):
        router.prompt("q", errors=[NOT_FOUND, NOT_FOUND])(lambda: "x")
    with pytest.raises(ValueError, match="must not set"):
        router.resource("a://c", errors=[NOT_FOUND], meta={META: []})(lambda: "x")
    assert len(router.features.resources) == 0 and len(router.features.prompts) == 0
