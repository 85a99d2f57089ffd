"""The official MCP client (``mcp`` 2.3.0), both modes, against ``examples/library.py`` over real
HTTP: resources, templates, prompts and completions backed by a SQLite yield dependency."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from conftest import rpc
from mcp import Client
from mcp.shared.exceptions import MCPError
from serving import uvicorn_thread
from stdio_wire import envelope, spawn

from examples import library

MODES = ["legacy", "2026-07-28"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with uvicorn_thread(library.app) as url:
        yield url


@pytest.mark.parametrize("mode", MODES)
async def test_client_lists_and_reads_resources_and_templates(server_url: str, mode: str) -> None:
    library.EVENTS.clear()
    with anyio.fail_after(15):
        async with Client(server_url, mode=mode, cache=None) as client:
            if mode == "legacy":  # a pinned 2026 client has not asked server/discover
                caps = client.server_capabilities
                assert caps is not None and caps.resources is not None and caps.prompts is not None and caps.completions is not None
                assert caps.resources.subscribe is True  # resources_subscribe=True, delivered on the GET stream
            listed = await client.list_resources()
            templates = await client.list_resource_templates()
            books = await client.read_resource("library://books")
            one = await client.read_resource("library://books/3")
            cover = await client.read_resource("library://covers/1")
            found = await client.read_resource("library://search?genre=horror&q=Dra")
    assert [r.uri for r in listed.resources] == ["library://books", "library://staff/notes"]
    assert [t.uri_template for t in templates.resource_templates] == [
        "library://books/{book_id}",
        "library://covers/{book_id}",
        "library://search{?q,genre,limit}",
        "library://shelf{/path*}",
    ]
    content = books.contents[0]
    assert isinstance(content, types.TextResourceContents) and content.mime_type == "application/json"
    assert [b["title"] for b in json.loads(content.text)] == ["Dune", "Dracula", "Emma", "Ulysses"]
    single = one.contents[0]
    assert isinstance(single, types.TextResourceContents)
    assert json.loads(single.text) == {"id": 3, "title": "Emma", "author": "Jane Austen", "genre": "romance", "uri": "library://books/3"}
    blob = cover.contents[0]
    assert isinstance(blob, types.BlobResourceContents)
    assert base64.b64decode(blob.blob, validate=True) == bytes(range(256)) * 4
    assert json.loads(found.contents[0].text) == ["Dracula"]  # type: ignore[union-attr]
    if mode != "legacy":
        assert listed.ttl_ms == 60_000 and listed.cache_scope == "public"  # per list
        assert books.ttl_ms == 5_000 and books.cache_scope == "public"  # per item
    assert library.EVENTS == ["db:open", "db:close"] * 3  # one connection per read that needs it, closed after


@pytest.mark.parametrize("mode", MODES)
async def test_client_gets_prompts_and_completions(server_url: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with Client(server_url, mode=mode, cache=None) as client:
            prompts = await client.list_prompts()
            prompt = await client.get_prompt("summarize_book", {"book_id": "1", "style": "detailed"})
            ids = await client.complete(types.PromptReference(type="ref/prompt", name="summarize_book"), {"name": "book_id", "value": ""})
            styles = await client.complete(
                types.PromptReference(type="ref/prompt", name="summarize_book"), {"name": "style", "value": "d"}, {"book_id": "2"}
            )
            template_ids = await client.complete(
                types.ResourceTemplateReference(type="ref/resource", uri="library://books/{book_id}"), {"name": "book_id", "value": "4"}
            )
            with pytest.raises(MCPError) as missing:
                await client.get_prompt("summarize_book", {})
    listing = prompts.prompts[0]
    assert listing.name == "summarize_book" and listing.arguments is not None
    assert [(a.name, a.required, a.description) for a in listing.arguments] == [
        ("book_id", True, "The id of the book to summarize"),
        ("style", False, "short or detailed"),
    ]
    embedded, text = prompt.messages[0].content, prompt.messages[1].content
    assert isinstance(embedded, types.EmbeddedResource) and embedded.resource.uri == "library://books/1"
    assert isinstance(text, types.TextContent) and text.text == "Write a detailed summary of Dune by Frank Herbert."
    assert ids.completion.values == ["1", "2", "3", "4"]
    assert styles.completion.values == ["detailed"] and styles.completion.total == 2
    assert template_ids.completion.values == ["4"]
    assert missing.value.error.code == -32602


@pytest.mark.parametrize("mode", MODES)
async def test_client_sees_the_eras_not_found_code(server_url: str, mode: str) -> None:
    with anyio.fail_after(15):
        async with Client(server_url, mode=mode, cache=None) as client:
            with pytest.raises(MCPError) as caught:
                await client.read_resource("library://books/99")
    assert caught.value.error.code == (-32002 if mode == "legacy" else -32602)
    assert caught.value.error.data["uri"] == "library://books/99"


def test_the_docs_example_is_the_tested_file() -> None:
    doc = (ROOT / "docs" / "resources.md").read_text(encoding="utf-8")
    block = doc.split('```python title="examples/library.py"\n', 1)[1].split("\n```", 1)[0] + "\n"
    assert block == (ROOT / "examples" / "library.py").read_text(encoding="utf-8")


async def test_library_over_stdio_in_both_eras(tmp_path: Path) -> None:
    """The same handlers on stdio: no HTTP, the same dispatcher (subscribe advertised: stdout carries the updates)."""
    async with spawn(tmp_path, app="examples.library:app", cwd=ROOT) as server:
        await server.send(rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, 1))
        caps = (await server.recv(timeout=60))["result"]["capabilities"]  # a loaded machine starts Python slowly
        await server.send(rpc("notifications/initialized", None, None))
        read = await server.request("resources/read", {"uri": "library://books/2"}, 2)
        prompt = await server.request("prompts/get", {"name": "summarize_book", "arguments": {"book_id": "3"}}, 3)
        missing = await server.request("resources/read", {"uri": "library://books/99"}, 4)
    async with spawn(tmp_path, app="examples.library:app", cwd=ROOT) as server:  # a 2026 connection
        await server.send(rpc("resources/read", {"uri": "library://books/99", "_meta": envelope()}, 5))
        modern = await server.recv(timeout=60)
    assert caps["resources"] == {"listChanged": False, "subscribe": True} and caps["completions"] == {}
    assert json.loads(read["result"]["contents"][0]["text"])["title"] == "Dracula"
    assert prompt["result"]["messages"][1]["content"]["text"] == "Write a short summary of Emma by Jane Austen."
    assert missing["error"]["code"] == -32002
    assert modern["error"]["code"] == -32602 and modern["error"]["data"]["uri"] == "library://books/99"
