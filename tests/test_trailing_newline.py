"""A final ``\\n`` slipped through every ``^...$`` validator checked with ``re.match`` (``$``
also matches just before a trailing newline): ``resources/read`` served
``library://books/1\\n`` as book 1 and handed a ``{/path*}`` handler the segment ``"a\\n"``
(while ``\\r`` was refused as "not a URI"), and the client's ``encode_header_value("a\\n")``
returned the raw newline instead of the base64 sentinel. Each check now matches the whole value.
"""

from __future__ import annotations

import pytest
from conftest import Wire, open_client
from fastapi import FastAPI

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx._wire.envelope import decode_header_value, encode_header_value
from fastapi_mcp_ctx._wire.uri_template import UriTemplate
from fastapi_mcp_ctx.errors import HeaderMismatchError


def _app() -> FastAPI:
    router = McpRouter()

    @router.resource("test://books/{book_id}", mime_type="text/plain")
    def book(book_id: int) -> str:
        """One book."""
        return f"book {book_id}"

    @router.resource("test://shelf{/path*}", mime_type="text/plain")
    def shelf(path: list[str]) -> str:
        """A shelf."""
        return "|".join(path)

    app = FastAPI()
    app.include_router(router)
    return app


@pytest.mark.parametrize("uri", ["test://books/1\n", "test://shelf/a\n", "test://books/1\r"])
async def test_a_uri_ending_in_a_control_character_is_not_a_uri(uri: str) -> None:
    async with open_client(_app()) as client:
        wire = Wire(client)
        await wire.initialize()
        response = await wire.legacy("resources/read", {"uri": uri}, check=False)
    error = response.json()["error"]
    assert error["code"] == -32602 and error["data"]["reason"] == "invalid_uri", error


@pytest.mark.parametrize("value", ["\n", "a\n", "add_note\n", "=?base64?YWRk?=\n"])
def test_a_value_ending_in_a_newline_is_sent_base64_and_round_trips(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.startswith("=?base64?") and "\n" not in encoded
    assert decode_header_value(encoded) == value


def test_a_raw_header_value_ending_in_a_newline_is_refused() -> None:
    with pytest.raises(HeaderMismatchError):
        decode_header_value("add\n")


def test_registration_names_ending_in_a_newline_are_refused() -> None:
    with pytest.raises(ValueError):
        UriTemplate("x://{a\n}")
    router = McpRouter()
    with pytest.raises(ValueError):

        @router.tool(name="add\n")
        async def add() -> str:  # pyright: ignore[reportUnusedFunction]
            """Never registered."""
            return "x"
