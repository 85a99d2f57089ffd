"""``ctx.consent.require``: examples/consent_delete.py over the wire (2026 rounds, replays, declines,
pre-answered confirmations, moved states, other callers) and with the official client in both eras."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import META_CAPABILITIES, Wire, guide_example, mcp_settings, open_client, result_of
from fastapi import Depends, FastAPI, Header, HTTPException
from mcp import Client
from mcp.client.session import ClientRequestContext
from serving import uvicorn_thread

from examples import consent_delete
from fastapi_mcp_ctx import Context, McpRouter, Principal, mcp_context
from fastapi_mcp_ctx.consent import CONSENT_INPUT_KEY

PATH = "/reports/q3.txt"
FORM_CAPS = {META_CAPABILITIES: {"elicitation": {"form": {}}}}
ORIGINAL = dict(consent_delete.FILES)


@pytest.fixture(autouse=True)
def _files() -> Iterator[None]:
    consent_delete.FILES.clear()
    consent_delete.FILES.update(ORIGINAL)
    yield
    consent_delete.FILES.clear()
    consent_delete.FILES.update(ORIGINAL)


@pytest.fixture
async def wire() -> AsyncIterator[Wire]:
    async with open_client(consent_delete.app) as client:
        yield Wire(client)


def answer(action: str, confirm: bool | None = True) -> dict[str, Any]:
    if action != "accept":
        return {CONSENT_INPUT_KEY: {"action": action}}
    return {CONSENT_INPUT_KEY: {"action": "accept", "content": {} if confirm is None else {"confirm": confirm}}}


async def ask(wire: Wire, path: str = PATH, **extra: Any) -> dict[str, Any]:
    response = await wire.modern("tools/call", {"name": "delete_file", "arguments": {"path": path}, **extra}, meta=FORM_CAPS)
    body = response.json()
    assert response.status_code == (400 if "error" in body else 200), response.text
    return body


async def test_a_confirmed_round_deletes_and_its_replay_is_asked_again(wire: Wire) -> None:
    first = (await ask(wire))["result"]
    assert first["resultType"] == "input_required" and set(first["inputRequests"]) == {CONSENT_INPUT_KEY}
    question = first["inputRequests"][CONSENT_INPUT_KEY]
    assert question["method"] == "elicitation/create" and PATH in question["params"]["message"]
    assert question["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    state = first["requestState"]
    assert "consent" not in state  # sealed: the record id is not readable
    done = (await ask(wire, requestState=state, inputResponses=answer("accept")))["result"]
    assert done["resultType"] == "complete" and done["structuredContent"] == {"deleted": PATH}
    assert PATH not in consent_delete.FILES
    consent_delete.FILES[PATH] = ORIGINAL[PATH]  # the file is back: a replay must not delete it again
    replay = (await ask(wire, requestState=state, inputResponses=answer("accept")))["result"]
    assert replay["resultType"] == "input_required" and PATH in consent_delete.FILES
    assert replay["requestState"] != state


@pytest.mark.parametrize(("action", "confirm", "shown"), [("decline", None, "decline"), ("cancel", None, "cancel"), ("accept", False, "decline")])
async def test_decline_cancel_or_an_unchecked_box_end_the_call(wire: Wire, action: str, confirm: bool | None, shown: str) -> None:
    state = (await ask(wire))["result"]["requestState"]
    result = (await ask(wire, requestState=state, inputResponses=answer(action, confirm)))["result"]
    assert result["isError"] is True and PATH in consent_delete.FILES
    error = result["_meta"]["fastapi-mcp-ctx/error"]  # the tool has an outputSchema
    assert error["data"]["reason"] == "consent_declined" and error["data"]["action"] == shown
    assert "nothing was done" in error["message"]


async def test_a_confirmation_the_server_never_asked_for_is_not_accepted(wire: Wire) -> None:
    pre_answered = (await ask(wire, inputResponses=answer("accept")))["result"]
    assert pre_answered["resultType"] == "input_required" and PATH in consent_delete.FILES
    forged = await ask(wire, requestState="consent/AAAAAAAAAAAAAAAAAAAAAA", inputResponses=answer("accept"))
    assert forged["error"]["code"] == -32602 and forged["error"]["data"]["reason"] == "invalid_request_state"
    assert PATH in consent_delete.FILES


async def test_a_state_asked_for_one_file_does_not_delete_another(wire: Wire) -> None:
    state = (await ask(wire))["result"]["requestState"]
    moved = await ask(wire, "/reports/q4.txt", requestState=state, inputResponses=answer("accept"))
    assert moved["error"]["code"] == -32602 and moved["error"]["data"]["reason"] == "invalid_request_state"
    assert set(consent_delete.FILES) == set(ORIGINAL)


async def test_content_changed_between_question_and_answer_is_asked_again(wire: Wire, caplog: pytest.LogCaptureFixture) -> None:
    state = (await ask(wire))["result"]["requestState"]
    consent_delete.FILES[PATH] = "revenue down 40%"
    with caplog.at_level(logging.WARNING, "fastapi_mcp_ctx"):
        again = (await ask(wire, requestState=state, inputResponses=answer("accept")))["result"]
    assert again["resultType"] == "input_required" and PATH in consent_delete.FILES
    assert "differs in content_hash" in caplog.text


async def test_a_client_that_cannot_elicit_gets_the_capability_refusal(wire: Wire) -> None:
    response = await wire.modern("tools/call", {"name": "delete_file", "arguments": {"path": PATH}})
    error = response.json()["error"]
    assert error["code"] == -32021 and "elicitation" in error["data"]["requiredCapabilities"]
    assert PATH in consent_delete.FILES


# -- another caller ---------------------------------------------------------------------------

USERS = {"alice": Principal("alice", tenant_id="acme", client_id="app"), "bob": Principal("bob", tenant_id="acme", client_id="app")}


def authenticate(authorization: str = Header()) -> Principal:
    principal = USERS.get(authorization.removeprefix("Bearer "))
    if principal is None:
        raise HTTPException(401, "invalid token")
    return principal


def gated_app(acted: list[str]) -> FastAPI:
    router = McpRouter(settings=mcp_settings(session_mode="stateless"), authenticate=authenticate)

    @router.tool()
    async def wipe(target: str, ctx: Context = Depends(mcp_context)) -> str:
        """Wipe a target once confirmed."""
        await ctx.consent.require(operation="wipe", target=target, message=f"Wipe {target}?")
        acted.append(f"{ctx.auth.subject}:{target}")
        return "wiped"

    app = FastAPI()
    app.include_router(router)
    return app


async def test_a_state_asked_of_one_user_is_refused_for_another() -> None:
    acted: list[str] = []
    async with open_client(gated_app(acted)) as client:
        wire = Wire(client)
        params = {"name": "wipe", "arguments": {"target": "db"}}
        alice, bob = {"authorization": "Bearer alice"}, {"authorization": "Bearer bob"}
        first = result_of(await wire.modern("tools/call", params, meta=FORM_CAPS, headers=alice))
        retry = {**params, "requestState": first["requestState"], "inputResponses": answer("accept")}
        stolen = (await wire.modern("tools/call", retry, meta=FORM_CAPS, headers=bob)).json()
        assert stolen["error"]["data"]["reason"] == "invalid_request_state" and acted == []
        assert result_of(await wire.modern("tools/call", retry, meta=FORM_CAPS, headers=alice))["content"][0]["text"] == "wiped"
    assert acted == ["alice:db"]


# -- the official client, both eras --------------------------------------------------------

ANSWERS: list[str] = []


async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert isinstance(params, types.ElicitRequestFormParams) and "Delete /reports/q3.txt" in params.message
    action = ANSWERS.pop(0)
    return types.ElicitResult(action=action, content={"confirm": True} if action == "accept" else None)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with uvicorn_thread(consent_delete.app) as url:
        yield url


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_client_confirms_and_declines(server_url: str, mode: str) -> None:
    ANSWERS[:] = ["decline", "accept"]
    with anyio.fail_after(30):
        async with Client(server_url, mode=mode, cache=None, elicitation_callback=on_elicit) as client:  # type: ignore[arg-type]
            declined = await client.call_tool("delete_file", {"path": PATH})
            assert declined.is_error is True and PATH in consent_delete.FILES
            done = await client.call_tool("delete_file", {"path": PATH})
            assert done.is_error is False and done.structured_content == {"deleted": PATH}
    assert PATH not in consent_delete.FILES and ANSWERS == []


# -- the guide's example ------------------------------------------------------------------------


async def test_the_guide_example_runs_as_written() -> None:
    namespace = guide_example("## Sealed request state and consent gates")
    app = namespace["app"]  # the example's own app (`uvicorn module:app`)
    async with open_client(app) as client:
        wire = Wire(client)
        params = {"name": "void_invoice", "arguments": {"invoice_id": "inv-7"}}
        asked = result_of(await wire.modern("tools/call", params, meta=FORM_CAPS))
        assert asked["inputRequests"][CONSENT_INPUT_KEY]["params"]["message"] == "Void invoice inv-7?"
        retry = {**params, "requestState": asked["requestState"], "inputResponses": answer("accept")}
        assert result_of(await wire.modern("tools/call", retry, meta=FORM_CAPS))["content"][0]["text"] == "voided inv-7"
    assert namespace["INVOICES"] == {}
