"""``parse_message`` parses the body's bytes (no decoded copy): ``from_json`` accepts exactly the
bodies that are valid UTF-8 and reads them as it reads their text, so the bytes give the messages
and the errors the decoded text gave; the text is made only where a path still needs it (a refused
body, an over-long number, the strict re-read for duplicate keys)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic_core import from_json

from fastapi_mcp_ctx._wire.jsonrpc import JsonRpcRequest, parse_message
from fastapi_mcp_ctx.errors import InvalidRequestError, McpError, ParseError

INVALID = [
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
    b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xfe", b"\xc2", b"\xe2\x82", b"\xf0\x9f\x98",
    b"\xc2\x41", b"\xe2\x28\xa1",
]  # fmt: skip
"""Stray continuation bytes, overlong forms, surrogates, code points past U+10FFFF, cut sequences."""
VALID = [b"\xc2\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf", b"\xed\x9f\xbf", b"\xef\xbb\xbf"]
PIECES = [*INVALID, *VALID, b"a", b'"', b"\\", b"{", b"}", b":", b",", b"1", b" ", b"\\u00e9", b"\\ud83d\\ude00", b"\\ud800"]


def _via_text(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "not utf-8"
    try:
        return ("ok", from_json(text, allow_inf_nan=False))
    except ValueError as exc:
        return ("error", str(exc))


def _via_bytes(body: bytes) -> Any:
    try:
        return ("ok", from_json(body, allow_inf_nan=False))
    except ValueError as exc:
        return ("error", str(exc))


def test_the_bytes_parse_as_their_text_and_only_when_utf8() -> None:
    rng = random.Random(7)
    bodies = [t.replace(b"%s", s) for s in INVALID + VALID for t in (b'{"a":"%s"}', b'{"%s":1}', b'{"a":1}%s', b'%s{"a":1}', b'["x%sy"]')]
    for _ in range(20000):
        inner = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))
        bodies += [b'{"k":"' + inner + b'"}', b'{"' + inner + b'":0}']
    for body in bodies:
        text_outcome, bytes_outcome = _via_text(body), _via_bytes(body)
        if text_outcome == "not utf-8":
            assert bytes_outcome[0] == "error", body
        else:
            assert bytes_outcome == text_outcome, body


@pytest.mark.parametrize("bad", INVALID)
def test_a_body_that_is_not_utf8_is_still_named_so(bad: bytes) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' + bad + b'"}}'
    with pytest.raises(ParseError, match="not valid UTF-8"):
        parse_message(body)


def test_the_paths_that_read_the_text_still_do() -> None:
    long = b"1" * 5000  # beyond the int-str limit: read as an overflowing number (the text path)
    message = parse_message(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":' + long + b"}}}")
    assert isinstance(message, JsonRpcRequest) and message.out_of_range == ("x",)
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_message(b'{"jsonrpc":"2.0","id":1,"method":"x"')
    with pytest.raises(InvalidRequestError, match="Duplicate key 'a'"):  # a backslash: the strict re-read of the text
        parse_message('{"jsonrpc":"2.0","id":1,"method":"t","params":{"name":"é\\n","arguments":{"a":1,"a":2}}}'.encode())
    accepted = parse_message('{"jsonrpc":"2.0","id":"é","method":"t","params":{"name":"\\u00e9 ✓"}}'.encode())
    assert isinstance(accepted, JsonRpcRequest) and accepted.id == "é" and accepted.params == {"name": "é ✓"}
    with pytest.raises(McpError):
        parse_message(b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":1,"method":"x"}')  # a BOM is no JSON whitespace, as before
