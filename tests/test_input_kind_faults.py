"""An ``inputResponses`` answer of another kind under the key an awaitable helper asks with is
no answer: the helper asks again (``input_required``), never crashes the call.

Found by the third hostile run: a 2026-07-28 retry without ``requestState`` (a first-round
``inputResponses``, admitted by shape alone) carrying an elicitation answer under the key of
``ctx.sample(key=...)`` or ``ctx.list_roots(key=...)``, or a roots answer under the key of
``ctx.elicit(key=...)``, reached the helper, which validated it as its own kind: a pydantic
``ValidationError`` (or ``KeyError``) and an ``internal_error`` result. Known faults B27 kind
(MRTR-INPUT-VALIDATION): answers are checked per action.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Wire, make_app, make_router, open_client
from fastapi import Depends
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, mcp_context
from fastapi_mcp_ctx.inputs import answers_method

CAPS = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
ELICIT = {"action": "accept", "content": {"name": "n"}}
SAMPLE = {"role": "assistant", "model": "m", "content": {"type": "text", "text": "Paris"}}
ROOTS = {"roots": [{"uri": "file:///tmp"}]}


class Name(BaseModel):
    name: str


def build() -> Any:
    router = make_router()

    @router.tool()
    async def asks_name(ctx: Context = Depends(mcp_context)) -> str:
        """Elicits."""
        answer = await ctx.elicit("Name?", Name, key="q")
        return f"name={answer.data.name if answer.data else None}"

    @router.tool()
    async def asks_model(ctx: Context = Depends(mcp_context)) -> str:
        """Samples."""
        answer = await ctx.sample("Capital?", max_tokens=10, key="q")
        return f"model={getattr(answer.content, 'text', None)}"

    @router.tool()
    async def asks_roots(ctx: Context = Depends(mcp_context)) -> str:
        """Lists roots."""
        return f"roots={len(await ctx.list_roots(key='q'))}"

    return make_app(router)


async def retry(app: Any, tool: str, answer: dict[str, Any]) -> dict[str, Any]:
    async with open_client(app) as client:
        response = await Wire(client).modern(
            "tools/call",
            {"name": tool, "arguments": {}, "inputResponses": {"q": answer}},
            meta={"io.modelcontextprotocol/clientCapabilities": CAPS},
            check=False,
        )
        assert response.status_code == 200, response.text
        return response.json()["result"]


@pytest.mark.parametrize(
    ("tool", "own", "expected", "others"),
    [
        ("asks_name", ELICIT, "name=n", [SAMPLE, ROOTS]),
        ("asks_model", SAMPLE, "model=Paris", [ELICIT, ROOTS, {"action": "decline"}]),
        ("asks_roots", ROOTS, "roots=1", [ELICIT, SAMPLE, {"action": "cancel"}]),
    ],
)
async def test_an_answer_of_another_kind_is_asked_again_and_the_right_kind_is_served(
    tool: str, own: dict[str, Any], expected: str, others: list[dict[str, Any]]
) -> None:
    app = build()
    for other in others:
        result = await retry(app, tool, other)
        assert result.get("resultType") == "input_required", result  # asked again, not an internal error
        assert "q" in result["inputRequests"] and not result.get("isError")
    served = await retry(app, tool, own)
    assert served["content"][0]["text"] == expected, served


@pytest.mark.parametrize(
    ("answer", "method", "fits"),
    [
        (ELICIT, "elicitation/create", True),
        ({"action": "decline"}, "elicitation/create", True),
        (ELICIT, "sampling/createMessage", False),
        (SAMPLE, "sampling/createMessage", True),
        (ROOTS, "sampling/createMessage", False),
        (ROOTS, "roots/list", True),
        (SAMPLE, "roots/list", False),
        (ROOTS, "tools/call", False),
    ],
)
def test_answers_method_tells_the_kind_by_shape(answer: dict[str, Any], method: str, fits: bool) -> None:
    assert answers_method(answer, method) is fits
