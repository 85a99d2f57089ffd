"""The guide's enrichment / content / error-contract example: as written, in process in both eras
(the results equal the JSON the guide shows), and with the official ``mcp`` client over real
HTTP (uvicorn) in both of its modes."""

from __future__ import annotations

import base64
import io
import json
import re
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import guide_example
from mcp import Client
from serving import uvicorn_thread

from fastapi_mcp_ctx.testing import McpTestClient

HEADING = "## Enrichment, content blocks and error contracts"
MODES = ["legacy", "2026-07-28"]


def _guide_json_blocks() -> list[dict[str, Any]]:
    text = (Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text(encoding="utf-8")
    section = text.split(f"{HEADING}\n", 1)[1].split("\n## ", 1)[0]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.DOTALL)]


def _without_era_members(result: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in result.items() if k != "resultType"}
    meta = {k: v for k, v in kept.pop("_meta", {}).items() if k != "io.modelcontextprotocol/serverInfo"}
    if meta:
        kept["_meta"] = meta
    return kept


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    return guide_example(HEADING)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_guide_example_answers_what_the_guide_shows(example: dict[str, Any], era: Any) -> None:
    shown_search, shown_failure = _guide_json_blocks()
    async with McpTestClient(example["app"], era=era, client_capabilities={"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        search = await client.call_tool("search_notes", {"q": "milk", "limit": 1})
        failure = await client.call_tool("note_card", {"index": 9})
        card = await client.call_tool("note_card", {"index": 1})
        greeting = await client.call_tool("greet", meta={"openai/locale": "it-IT"})
        plain = await client.call_tool("greet", meta={"openai/locale": 7})
    assert _without_era_members(search.result) == shown_search
    got_failure = _without_era_members(failure.result)
    got_failure["_meta"]["fastapi-mcp-ctx/error"]["data"]["requestId"] = 3
    assert got_failure == shown_failure
    assert set(tools["search_notes"]["outputSchema"]["properties"]) == {"items", "totalCount", "effectiveQuery", "notice"}
    assert tools["search_notes"]["outputSchema"]["required"] == ["items"]
    assert tools["note_card"]["_meta"]["fastapi-mcp-ctx/errors"] == [
        {"reason": "not_found", "code": -32004, "hint": "Call search_notes for the notes that exist."}
    ]
    assert [b["type"] for b in card.content] == ["image", "audio", "text"]
    assert card.structured == {"result": "call ada"}
    assert greeting.structured == {"result": "Ciao, client with MCP Apps views"}
    assert plain.structured == {"result": "Hello, client with MCP Apps views"}


@pytest.fixture(scope="module")
def server_url(example: dict[str, Any]) -> Iterator[str]:
    with uvicorn_thread(example["app"]) as url:
        yield url


@pytest.mark.parametrize("mode", MODES)
async def test_official_client_reads_enrichment_blocks_and_contract_errors(
    example: dict[str, Any], server_url: str, mode: str
) -> None:
    with anyio.fail_after(15):
        async with Client(server_url, mode=mode, cache=None) as client:
            listing = await client.list_tools()
            search_tool = next(t for t in listing.tools if t.name == "search_notes")
            assert search_tool.output_schema is not None and "totalCount" in search_tool.output_schema["properties"]
            found = await client.call_tool("search_notes", {"q": "milk"})
            empty = await client.call_tool("search_notes", {"q": "zebra"})
            card = await client.call_tool("note_card", {"index": 0})
            missing = await client.call_tool("note_card", {"index": 9})
    assert found.is_error is False
    assert found.structured_content == {"items": ["buy milk", "milk the goat"], "totalCount": 2, "effectiveQuery": "milk"}
    assert empty.structured_content == {"items": [], "totalCount": 0, "effectiveQuery": "zebra", "notice": "Nothing matched; try a single word."}
    assert isinstance(empty.content[-1], types.TextContent) and "notice: Nothing matched" in empty.content[-1].text

    assert card.is_error is False and card.structured_content == {"result": "buy milk"}
    image, audio, text = card.content
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data, validate=True) == example["PIXEL"]
    assert isinstance(audio, types.AudioContent) and audio.mime_type == "audio/wav"
    with wave.open(io.BytesIO(base64.b64decode(audio.data, validate=True))) as chime:
        assert chime.getframerate() == 8000 and chime.readframes(2048) == bytes(range(256)) * 4
    assert isinstance(text, types.TextContent) and text.text == "buy milk"

    assert missing.is_error is True and missing.structured_content is None
    assert [c.text for c in missing.content if isinstance(c, types.TextContent)] == [
        "No note 9",
        "Recovery: Call search_notes for the notes that exist.",
    ]
    assert missing.meta is not None
    envelope = missing.meta["fastapi-mcp-ctx/error"]
    assert envelope["code"] == -32004 and envelope["data"]["reason"] == "not_found" and envelope["data"]["index"] == 9
    assert isinstance(envelope["data"]["requestId"], (int, str))
