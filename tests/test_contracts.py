"""Typed error contracts: errors=[ErrorContract(...)], ctx.fail, ctx.recovery_for, one envelope."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from conftest import make_app, make_router
from fastapi import Depends

from fastapi_mcp_ctx import Context, ErrorContract, ToolError, mcp_context
from fastapi_mcp_ctx.contracts import build_contracts, declared_reasons_of
from fastapi_mcp_ctx.errors import DeclarationError
from fastapi_mcp_ctx.testing import McpTestClient

NOT_FOUND = ErrorContract("not_found", hint="Call list_notes for the ids that exist.", code=-32004, message="No such note.")
RATE_LIMITED = ErrorContract("rate_limited", hint="Wait a minute, then call again.", code=429)
Reason = Literal["not_found", "rate_limited"]
ENVELOPE = "fastapi-mcp-ctx/error"


def _app() -> Any:
    router = make_router()

    @router.tool(errors=[NOT_FOUND, RATE_LIMITED])
    async def get_note(note_id: int, how: str = "fail", ctx: Context[Reason] = Depends(mcp_context)) -> str:
        """Fails in the ways it declares."""
        if how == "fail":
            ctx.fail("not_found", f"No note {note_id}", noteId=note_id)
        if how == "default_message":
            ctx.fail("not_found")
        if how == "raise":  # the same envelope as ctx.fail, hint and code from the contract
            raise ToolError(f"No note {note_id}", reason="not_found", data={"noteId": note_id})
        if how == "raise_own_code":
            raise ToolError("slow down", reason="rate_limited", code=7, recovery_hint="Own hint.")
        if how == "undeclared":
            ctx.fail("gone", "whatever")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        if how == "crash":
            raise RuntimeError("secret detail 1234")
        if how == "hint":
            return ctx.recovery_for("rate_limited") or "none"
        return "ok"

    @router.tool()
    async def no_contract(ctx: Context = Depends(mcp_context)) -> None:
        """Declares nothing: every ctx.fail is undeclared; recovery_for is None."""
        if ctx.recovery_for("not_found") is None:
            ctx.fail("not_found", "nope")

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return _app()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_contracts_are_listed_in_the_tool_meta(app: Any, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
    assert tools["get_note"]["_meta"]["fastapi-mcp-ctx/errors"] == [
        {"reason": "not_found", "code": -32004, "hint": "Call list_notes for the ids that exist.", "message": "No such note."},
        {"reason": "rate_limited", "code": 429, "hint": "Wait a minute, then call again."},
    ]
    assert "_meta" not in tools["no_contract"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_ctx_fail_and_tool_error_build_one_envelope(app: Any, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        failed = await client.call_tool("get_note", {"note_id": 7, "how": "fail"})
        raised = await client.call_tool("get_note", {"note_id": 7, "how": "raise"})
        default = await client.call_tool("get_note", {"note_id": 7, "how": "default_message"})
        own = await client.call_tool("get_note", {"note_id": 7, "how": "raise_own_code"})
    for result in (failed, raised):
        assert result.is_error is True
        envelope = result.result["_meta"][ENVELOPE]
        data = dict(envelope["data"])
        assert isinstance(data.pop("requestId"), int)
        assert envelope["code"] == -32004 and envelope["message"] == "No note 7"
        assert data == {"reason": "not_found", "recovery": {"hint": "Call list_notes for the ids that exist."}, "noteId": 7}
        assert [b["text"] for b in result.content] == ["No note 7", "Recovery: Call list_notes for the ids that exist."]
        assert "structuredContent" not in result.result  # the tool has an outputSchema
    assert failed.result["_meta"][ENVELOPE]["data"]["requestId"] != raised.result["_meta"][ENVELOPE]["data"]["requestId"]
    assert default.result["_meta"][ENVELOPE]["message"] == "No such note."
    mine = own.result["_meta"][ENVELOPE]
    assert mine["code"] == 7 and mine["data"]["recovery"] == {"hint": "Own hint."}, "what the raise says wins"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_undeclared_reason_and_crash_stay_generic(app: Any, era: Any, caplog: pytest.LogCaptureFixture) -> None:
    async with McpTestClient(app, era=era) as client:
        undeclared = await client.call_tool("get_note", {"note_id": 1, "how": "undeclared"})
        assert "declares no such error reason" in caplog.text and "'gone'" in caplog.text
        caplog.clear()
        crash = await client.call_tool("get_note", {"note_id": 1, "how": "crash"})
        assert "secret detail 1234" in caplog.text
        bare = await client.call_tool("no_contract")
    for result in (undeclared, crash, bare):
        assert result.is_error is True
        envelope = result.result["_meta"][ENVELOPE]
        assert envelope["code"] == -32603 and envelope["data"]["reason"] == "internal_error"
        assert "requestId" in envelope["data"]
        assert "gone" not in result.text and "secret" not in result.text
    assert bare.result["structuredContent"]["error"] == bare.result["_meta"][ENVELOPE]  # no outputSchema there


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_recovery_for(app: Any, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        hint = await client.call_tool("get_note", {"note_id": 1, "how": "hint"})
    assert hint.structured == {"result": "Wait a minute, then call again."}


# -- units --------------------------------------------------------------------------------------


def test_contract_validation() -> None:
    with pytest.raises(ValueError, match="snake_case"):
        ErrorContract("Not-Found", hint="x")
    with pytest.raises(ValueError, match="hint"):
        ErrorContract("not_found", hint=" ")
    with pytest.raises(ValueError, match="code"):
        ErrorContract("not_found", hint="x", code=True)
    with pytest.raises(ValueError, match="declared twice"):
        build_contracts([NOT_FOUND, NOT_FOUND], "tool 't'")
    with pytest.raises(ValueError, match="list of ErrorContract"):
        build_contracts(NOT_FOUND, "tool 't'")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert build_contracts([], "tool 't'") is None


def test_failure_data_keeps_reserved_keys_for_the_framework() -> None:
    contracts = build_contracts([NOT_FOUND], "tool 't'")
    assert contracts is not None
    with pytest.raises(ValueError, match="reserved"):
        contracts.failure("not_found", None, {"recovery": "mine"})
    with pytest.raises(DeclarationError, match="declared: 'not_found'"):
        contracts.failure("gone", None, {})
    error = contracts.failure("not_found", "m", {"reason_detail": 1})
    assert error.to_error(3) == {
        "code": -32004,
        "message": "m",
        "data": {"requestId": 3, "reason": "not_found", "recovery": {"hint": NOT_FOUND.hint}, "reason_detail": 1},
    }


def test_context_annotation_must_name_declared_reasons() -> None:
    router = make_router()

    async def tool(ctx: Context[Literal["not_found", "gone"]] = Depends(mcp_context)) -> str:
        return "x"

    with pytest.raises(ValueError, match="'gone'"):
        router.add_tool(tool, errors=[NOT_FOUND])
    router.add_tool(tool, name="fine", errors=[NOT_FOUND, ErrorContract("gone", hint="It was deleted.")])
    assert declared_reasons_of(Context[Literal["a"] | Literal["b"]]) == ("a", "b")
    assert declared_reasons_of(Context) is None


def test_meta_may_not_set_the_contract_key() -> None:
    router = make_router()

    async def tool() -> str:
        return "x"

    with pytest.raises(ValueError, match="errors= fills it"):
        router.add_tool(tool, errors=[NOT_FOUND], meta={"fastapi-mcp-ctx/errors": []})
