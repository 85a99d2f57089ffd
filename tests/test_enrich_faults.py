"""Known faults on what ctx.content, ctx.enrich and ctx.fail touch, on the raw wire in both eras:
B41 (base64 of image/audio data: strict, once), B36 (error results of a tool whose outputSchema
enrichment extends), and the error codes of declared contracts."""

from __future__ import annotations

import base64
from typing import Any, TypedDict

import pytest
from conftest import Wire, make_app, make_router, open_client, result_of
from fastapi import Depends

from fastapi_mcp_ctx import Context, ErrorContract, audio_content, image_content, mcp_context
from fastapi_mcp_ctx.content import strict_base64

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
PAYLOADS = {
    "all_bytes": bytes(range(256)) * 4,  # '+' and '/' in the encoding, far beyond 57 bytes (a MIME line)
    "58_bytes": bytes(range(198, 256)),  # one byte past a 57-byte MIME line
    "png": PNG,
    "empty": b"",
}


class Extras(TypedDict, total=False):
    totalCount: int


@pytest.fixture
def app() -> Any:
    router = make_router()

    @router.tool()
    async def picture(name: str, ctx: Context = Depends(mcp_context)) -> str:
        """Adds the payload as an image and as audio."""
        ctx.content.image(PAYLOADS[name], "image/png")
        ctx.content.audio(bytearray(PAYLOADS[name]), "audio/ogg; codecs=opus")
        return name

    @router.tool()
    async def as_text(data: str, mime: str = "image/png", ctx: Context = Depends(mcp_context)) -> str:
        """Adds a str that must already be strict base64."""
        ctx.content.image(data, mime)
        return "added"

    @router.tool(enrichment=Extras, errors=[ErrorContract("not_found", hint="List first.", code=-32004)])
    async def lookup(key: str, ctx: Context = Depends(mcp_context)) -> dict[str, int]:
        """Fails with a declared reason for an unknown key."""
        ctx.enrich.total(1)
        if key != "a":
            ctx.fail("not_found", f"No key {key!r}")
        return {"a": 1}

    return make_app(router)


@pytest.mark.parametrize("name", sorted(PAYLOADS))
async def test_b41_bytes_become_strict_base64_once(wire: Wire, era: str, name: str) -> None:
    result = result_of(await wire.call_tool(era, "picture", {"name": name}))
    assert result["isError"] is False
    image, audio = result["content"][0], result["content"][1]
    for block in (image, audio):
        data = block["data"]
        assert "\n" not in data and "\r" not in data and "-" not in data and "_" not in data
        assert len(data) % 4 == 0
        assert base64.b64decode(data, validate=True) == PAYLOADS[name]
        assert data == base64.b64encode(PAYLOADS[name]).decode()
    assert audio["mimeType"] == "audio/ogg; codecs=opus"
    assert "structuredContent" in result and "data" not in str(result["structuredContent"])


async def test_b41_base64_text_is_sent_as_is_never_encoded_twice(wire: Wire, era: str) -> None:
    text = base64.b64encode(PNG).decode()
    result = result_of(await wire.call_tool(era, "as_text", {"data": text}))
    assert result["content"][0]["data"] == text
    assert base64.b64decode(result["content"][0]["data"], validate=True) == PNG


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (base64.urlsafe_b64encode(bytes(range(256))).decode(), "image/png"),  # '-' / '_' alphabet
        (base64.b64encode(bytes(range(256))).decode().rstrip("="), "image/png"),  # padding stripped
        (base64.encodebytes(bytes(range(100))).decode(), "image/png"),  # MIME line breaks
        ("aGVsbG8=", "audio/wav"),  # an image block must be image/*
        ("aGVsbG8=", "image"),  # not type/subtype
        ("aGVsbG9=", "image/png"),  # non-zero trailing bits: not canonical
    ],
)
async def test_b41_bad_base64_text_or_media_type_is_refused(wire: Wire, era: str, data: str, mime: str) -> None:
    result = result_of(await wire.call_tool(era, "as_text", {"data": data, "mime": mime}))
    assert result["isError"] is True
    assert result["_meta"]["fastapi-mcp-ctx/error"]["data"]["reason"] == "internal_error"
    assert all(block["type"] == "text" for block in result["content"])


def test_b41_builders_share_the_strict_encoder() -> None:
    assert image_content(PNG).data == base64.b64encode(PNG).decode()
    assert audio_content(base64.b64encode(b"abc").decode()).data == "YWJj"
    with pytest.raises(ValueError, match="standard base64"):
        image_content(base64.urlsafe_b64encode(b"\xfb\xff").decode())
    with pytest.raises(TypeError):
        strict_base64(123)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def test_b36_declared_failure_with_enriched_output_schema_stays_is_error(wire: Wire, era: str) -> None:
    listing = result_of(await wire.request(era, "tools/list"))
    schema = next(t for t in listing["tools"] if t["name"] == "lookup")["outputSchema"]
    assert "totalCount" in schema["properties"]
    ok = result_of(await wire.call_tool(era, "lookup", {"key": "a"}))
    assert ok["structuredContent"] == {"a": 1, "totalCount": 1}
    failed = result_of(await wire.call_tool(era, "lookup", {"key": "zz"}))
    assert failed["isError"] is True
    assert failed["content"][0]["text"] == "No key 'zz'", "the tool's own message, never a schema-validation one"
    assert "structuredContent" not in failed
    envelope = failed["_meta"]["fastapi-mcp-ctx/error"]
    assert envelope["code"] == -32004
    assert envelope["data"]["reason"] == "not_found" and envelope["data"]["recovery"] == {"hint": "List first."}
    assert "requestId" in envelope["data"]


async def test_mapping_output_returning_an_enrichment_key_is_invalid_output(era: str) -> None:
    router = make_router()

    @router.tool(enrichment=Extras)
    async def counts(ctx: Context = Depends(mcp_context)) -> dict[str, int]:
        """Returns totalCount itself and sets it too: the server's bug."""
        ctx.enrich.total(2)
        return {"totalCount": 3}

    async with open_client(make_app(router)) as client:
        result = result_of(await Wire(client).call_tool(era, "counts"))
    assert result["isError"] is True
    assert result["_meta"]["fastapi-mcp-ctx/error"]["data"]["reason"] == "invalid_output"
    assert "totalCount" in result["content"][0]["text"]
