"""ctx.enrich (declared notices, totals, echoes) and ctx.content (image/audio blocks), both eras.

Every result goes through ``McpTestClient``'s check against the official wire models.
"""

from __future__ import annotations

import base64
import json
from typing import Any, NotRequired, TypedDict

import pytest
from conftest import make_app, make_router
from fastapi import Depends
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from fastapi_mcp_ctx import Context, mcp_context
from fastapi_mcp_ctx.errors import DeclarationError
from fastapi_mcp_ctx.testing import McpTestClient

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + bytes(range(256)) * 2


class SearchEnrichment(TypedDict, total=False):
    totalCount: int
    effectiveQuery: str
    notice: str


class Hit(BaseModel):
    items: list[str]


class Required(TypedDict):
    totalCount: int
    notice: NotRequired[str]


WORDS = ["alpha", "beta", "gamma"]


def _app() -> Any:
    router = make_router()

    @router.tool(enrichment=SearchEnrichment)
    async def search(q: str, ctx: Context = Depends(mcp_context)) -> Hit:
        """Find words."""
        found = [w for w in WORDS if q in w]
        ctx.enrich.total(len(found))
        ctx.enrich.echo(q.strip())
        if not found:
            ctx.enrich.notice("Nothing matched; try a shorter query.")
        return Hit(items=found)

    @router.tool(enrichment={"totalCount": int})
    async def count(n: int, ctx: Context = Depends(mcp_context)) -> int:
        """A wrapped output with enrichment beside `result`."""
        ctx.enrich(totalCount=n)
        return n

    @router.tool(enrichment=SearchEnrichment)
    async def quiet() -> Hit:
        """Declares enrichment, sets none."""
        return Hit(items=[])

    @router.tool(enrichment=Required)
    async def forgetful(ctx: Context = Depends(mcp_context)) -> Hit:
        """A required field left unset: the server's bug."""
        ctx.enrich.notice("set the optional one only")
        return Hit(items=[])

    @router.tool(enrichment=SearchEnrichment)
    async def wrong_field(ctx: Context = Depends(mcp_context)) -> Hit:
        """An undeclared field: a programming error."""
        ctx.enrich(bogus=1)
        return Hit(items=[])

    @router.tool(enrichment=SearchEnrichment)
    async def wrong_type(ctx: Context = Depends(mcp_context)) -> Hit:
        """A value outside the declared type."""
        ctx.enrich(totalCount="3")
        return Hit(items=[])

    @router.tool()
    async def plain(ctx: Context = Depends(mcp_context)) -> Hit:
        """Declares nothing: ctx.enrich is a no-op."""
        ctx.enrich(anything=1)
        ctx.enrich.total(5)
        return Hit(items=["x"])

    @router.tool()
    async def picture(ctx: Context = Depends(mcp_context)) -> Hit:
        """An image and an audio block beside a structured result."""
        ctx.content.image(PNG, "image/png")
        ctx.content.audio(b"RIFF\x00\x00\xff\xfe" * 20, "audio/wav")
        ctx.content({"type": "text", "text": "caption"})
        return Hit(items=["drawn"])

    @router.tool(enrichment=SearchEnrichment)
    async def both(ctx: Context = Depends(mcp_context)) -> str:
        """Enrichment and blocks together; then fails: neither reaches the error."""
        ctx.content.image(PNG)
        ctx.enrich.total(1)
        return "ok"

    @router.tool(enrichment=SearchEnrichment)
    async def failing(ctx: Context = Depends(mcp_context)) -> Hit:
        """Accumulates, then raises: the error result carries neither."""
        ctx.content.image(PNG)
        ctx.enrich.total(1)
        raise ValueError("boom")

    @router.tool(enrichment=SearchEnrichment)
    async def cloned(ctx: Context = Depends(mcp_context)) -> Hit:
        """ctx.with_extra's copy reaches the same result."""
        ctx.with_extra(step="inner").enrich.total(7)
        ctx.with_extra(step="img").content.image(PNG)
        return Hit(items=[])

    return make_app(router)


@pytest.fixture
def app() -> Any:
    return _app()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_enrichment_extends_output_schema_and_lands_in_structured_content(app: Any, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        schema = tools["search"]["outputSchema"]
        assert schema["properties"]["items"]["type"] == "array"
        assert schema["properties"]["totalCount"]["type"] == "integer"
        assert {"effectiveQuery", "notice"} <= set(schema["properties"])
        assert schema["required"] == ["items"]
        assert "default" not in schema["properties"]["notice"], "an unset field is absent, never null"
        assert tools["count"]["outputSchema"]["properties"].keys() == {"result", "totalCount"}
        assert "outputSchema" in tools["plain"] and "totalCount" not in tools["plain"]["outputSchema"]["properties"]

        hit = await client.call_tool("search", {"q": " a"})
        assert hit.is_error is False
        assert hit.structured == {"items": [], "totalCount": 0, "effectiveQuery": "a", "notice": "Nothing matched; try a shorter query."}
        Draft202012Validator(schema).validate(hit.structured)
        assert [b["type"] for b in hit.content] == ["text", "text"]
        assert json.loads(hit.content[0]["text"]) == {"items": []}, "the output's own JSON text stays first"
        assert hit.content[1]["text"].splitlines() == [
            "totalCount: 0",
            "effectiveQuery: a",
            "notice: Nothing matched; try a shorter query.",
        ]

        found = await client.call_tool("search", {"q": "ta"})
        assert found.structured == {"items": ["beta"], "totalCount": 1, "effectiveQuery": "ta"}

        wrapped = await client.call_tool("count", {"n": 4})
        assert wrapped.structured == {"result": 4, "totalCount": 4}
        Draft202012Validator(tools["count"]["outputSchema"]).validate(wrapped.structured)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_no_enrichment_set_or_declared_costs_nothing_on_the_wire(app: Any, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        quiet = await client.call_tool("quiet")
        assert quiet.structured == {"items": []} and len(quiet.content) == 1
        plain = await client.call_tool("plain")
        assert plain.is_error is False and plain.structured == {"items": ["x"]} and len(plain.content) == 1


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_enrichment_misuse_is_a_crash_with_the_detail_in_the_log(app: Any, era: Any, caplog: pytest.LogCaptureFixture) -> None:
    async with McpTestClient(app, era=era) as client:
        for tool, detail in [("wrong_field", "no enrichment field 'bogus'"), ("wrong_type", "field 'totalCount' got str")]:
            caplog.clear()
            result = await client.call_tool(tool)
            assert result.is_error is True
            envelope = result.result["_meta"]["fastapi-mcp-ctx/error"]
            assert envelope["code"] == -32603 and envelope["data"]["reason"] == "internal_error"
            assert "bogus" not in result.text and "totalCount" not in result.text, "the detail stays in the server log"
            assert detail in caplog.text
        forgot = await client.call_tool("forgetful")
        assert forgot.is_error is True
        envelope = forgot.result["_meta"]["fastapi-mcp-ctx/error"]
        assert envelope["code"] == -32603 and envelope["data"]["reason"] == "invalid_output"
        assert "totalCount" in forgot.text
        assert "structuredContent" not in forgot.result, "a tool with an outputSchema gets none on an error"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_content_blocks_are_prepended_and_never_structured(app: Any, era: Any) -> None:
    async with McpTestClient(app, era=era) as client:
        result = await client.call_tool("picture")
        assert [b["type"] for b in result.content] == ["image", "audio", "text", "text"]
        image, audio = result.content[0], result.content[1]
        assert image["mimeType"] == "image/png" and base64.b64decode(image["data"], validate=True) == PNG
        assert audio["mimeType"] == "audio/wav" and base64.b64decode(audio["data"], validate=True) == b"RIFF\x00\x00\xff\xfe" * 20
        assert "\n" not in image["data"] and len(image["data"]) % 4 == 0
        assert result.content[2] == {"type": "text", "text": "caption"}
        assert result.structured == {"items": ["drawn"]}

        both = await client.call_tool("both")
        assert [b["type"] for b in both.content] == ["image", "text", "text"]
        assert both.structured == {"result": "ok", "totalCount": 1}

        failing = await client.call_tool("failing")
        assert failing.is_error is True
        assert all(b["type"] == "text" for b in failing.content), "an error result carries no accumulated block"
        assert "structuredContent" not in failing.result

        cloned = await client.call_tool("cloned")
        assert cloned.structured == {"items": [], "totalCount": 7}
        assert cloned.content[0]["type"] == "image"


# -- registration -------------------------------------------------------------------------------


def test_enrichment_registration_errors() -> None:
    router = make_router()

    async def out() -> Hit:
        return Hit(items=[])

    async def untyped():  # type: ignore[no-untyped-def]  # noqa: ANN202
        return {}

    with pytest.raises(ValueError, match="collides with the output's own field"):
        router.add_tool(out, name="clash", enrichment={"items": int})
    with pytest.raises(ValueError, match="annotate the return type"):
        router.add_tool(untyped, name="untyped", enrichment={"totalCount": int})
    with pytest.raises(ValueError, match="must match"):
        router.add_tool(out, name="badname", enrichment={"total-count": int})
    with pytest.raises(ValueError, match="TypedDict class, a pydantic model class or a mapping"):
        router.add_tool(out, name="badkind", enrichment=[("totalCount", int)])


def test_model_declaration_keeps_descriptions_constraints_and_required() -> None:
    router = make_router()

    class Meta(BaseModel):
        totalCount: int = Field(ge=0, description="Matches before truncation.")
        notice: str | None = None

    async def out() -> Hit:
        return Hit(items=[])

    router.add_tool(out, name="modelled", enrichment=Meta)
    tool = router.registry.get("modelled")
    assert tool is not None and tool.enrichment is not None
    schema = tool.listing["outputSchema"]
    assert schema["properties"]["totalCount"]["description"] == "Matches before truncation."
    assert schema["required"] == ["items", "totalCount"]
    with pytest.raises(DeclarationError, match="totalCount"):
        tool.enrichment.value_of("totalCount", -1)
    assert tool.enrichment.value_of("totalCount", 2) == 2
    with pytest.raises(DeclarationError):
        tool.enrichment.value_of("totalCount", True)  # strict: a bool is not an integer
